"""Penalty bookkeeping of vLLM's Model Runner V2: ``bincount`` for newly added requests.

Taught in chapter 3 (pinned ``non_blocking`` transfers). Presence, frequency and
repetition penalties need, per request slot, which tokens occur in the prompt
and how often each has been produced. When new requests take over slots, their
rows are rebuilt: zeroed (they hold the previous occupant's counts), then filled
by a kernel that only ever *adds*.

* :func:`bincount_kernel` — what vLLM's Triton ``_bincount_kernel`` does, in
  torch ops: set the prompt flags, add the output counts. It never zeroes, and,
  like the merged kernel, it masks by position only: a token id equal to
  ``vocab_size`` lands in the next row (vLLM #49081, open, adds the guard).
* :func:`bincount_baseline` — zeroing with ``x[idx] = 0`` (from vLLM #34662):
  advanced-index assignment keeps the Python scalar in host memory and copies it
  to the device, blocking (vLLM's source since #41429: "Use index_fill_ instead of
  `tensor[idx] = 0` to avoid sync"). #34662's first revision wrote
  ``x[idx].zero_()``, which zeroes a gathered copy; its review caught that.
The checks compare against plain host loops with #49081's guard (token ids outside
``[0, vocab_size)`` are neither flagged nor counted), kept in the chapter's checks room.

The reader writes the sync-free ``bincount`` in Exercise 3.5. vLLM packs the
prompt flags into 32 per int32 word; the lab keeps one int32 flag per token.
"""

from __future__ import annotations

import torch

from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


def bincount_kernel(idx_mapping: torch.Tensor, all_token_ids: torch.Tensor, prompt_len: torch.Tensor,
                    prefill_len: torch.Tensor, prompt_bin_mask: torch.Tensor, output_bin_counts: torch.Tensor,
                    max_prefill_len: int) -> None:
    """Add the rows' tokens: flag prompt tokens, count the prefilled output tokens. Never clears anything.

    No guard on the token ids, as in vLLM's merged kernel: an id of ``vocab_size`` or more
    writes into a later row of the flattened tables (or past their end).

    ``idx_mapping`` [n] (device): the slots to update. ``all_token_ids`` [slots, max_len],
    ``prompt_len``/``prefill_len`` [slots] (device). ``prompt_bin_mask``/``output_bin_counts``
    [slots, vocab] int32 (device), updated in place. ``max_prefill_len`` is a host int.
    """
    rows = idx_mapping.long()  # [n]
    vocab = output_bin_counts.shape[1]
    tokens = all_token_ids[rows, :max_prefill_len].long()  # [n, L]
    pos = torch.arange(max_prefill_len, device=all_token_ids.device)  # [L]
    plen = prompt_len[rows].unsqueeze(1)  # [n, 1]
    flen = prefill_len[rows].unsqueeze(1)  # [n, 1]
    in_prompt = pos < plen  # [n, L]
    in_output = (pos >= plen) & (pos < flen)  # [n, L]
    flat = (rows.unsqueeze(1) * vocab + tokens).flatten()  # [n * L] positions in the [slots, vocab] tables
    prompt_bin_mask.view(-1).scatter_reduce_(0, flat, in_prompt.flatten().to(prompt_bin_mask.dtype), reduce="amax")
    output_bin_counts.view(-1).scatter_add_(0, flat, in_output.flatten().to(output_bin_counts.dtype))


@answer_key("3.5", role="vLLM's code before #41429", scope="checks")
def bincount_baseline(expanded_idx_mapping: torch.Tensor, all_token_ids: torch.Tensor, prompt_len: torch.Tensor,
                      prefill_len: torch.Tensor, prompt_bin_mask: torch.Tensor, output_bin_counts: torch.Tensor,
                      max_prefill_len: int) -> None:
    """Before PR #41429: the rows are zeroed by advanced-index assignment, one blocking upload each."""
    idx = expanded_idx_mapping.long()
    prompt_bin_mask[idx] = 0
    output_bin_counts[idx] = 0
    bincount_kernel(idx, all_token_ids, prompt_len, prefill_len, prompt_bin_mask, output_bin_counts, max_prefill_len)
