"""Bad words: forbid token sequences (vLLM's ``vllm/v1/sample/ops/bad_words.py``).

Taught in chapter 3 (pinned ``non_blocking`` transfers), Exercise 3.8. A request may
list "bad words", each a sequence of token ids. When the request's last tokens equal
a bad word's prefix, the word's last token is banned for this step: its logit becomes
``-inf``. A one-token bad word is always banned.

* :func:`_apply_bad_words_single_batch_baseline` — before PR #41429: ``logits[token] = -inf``.
  The indexed element and the value have the same shape (0-d), so torch copies the
  value, a 0-d host tensor, to the device: a blocking copy for every banned token.
  PR #41429 writes through a one-element slice, ``logits[token:token + 1]``, where the
  shapes differ and the value becomes a ``fill_`` argument (ATen's ``copy_to``).
* :func:`apply_bad_words` — every request's row.

The plain reference the checks compare against lives in the chapter's checks room, kept from the reader's code.
"""

from __future__ import annotations

from typing import Callable

import torch

from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


_SMALLEST_LOGIT = float("-inf")

SingleBatchFunction = Callable[[torch.Tensor, list[list[int]], list[int]], None]


@answer_key("3.8", role="vLLM's code before #41429", scope="checks")
def _apply_bad_words_single_batch_baseline(logits: torch.Tensor, bad_words_token_ids: list[list[int]],
                                           past_tokens_ids: list[int]) -> None:
    """Before PR #41429. ``logits`` [vocab] (device) is one request's row, changed in place."""
    for bad_word_ids in bad_words_token_ids:
        if len(bad_word_ids) > len(past_tokens_ids) + 1:
            continue  # longer than what the request has produced, plus the token to come
        prefix_length = len(bad_word_ids) - 1
        last_token_id = bad_word_ids[-1]
        actual_prefix = past_tokens_ids[-prefix_length:] if prefix_length > 0 else []
        if actual_prefix == bad_word_ids[:prefix_length]:
            logits[last_token_id] = _SMALLEST_LOGIT  # a 0-d host tensor copied over, blocking


def apply_bad_words(logits: torch.Tensor, bad_words_token_ids: dict[int, list[list[int]]],
                    past_tokens_ids: list[list[int]],
                    single_batch: SingleBatchFunction = _apply_bad_words_single_batch_baseline) -> None:
    """Ban the bad words of every request that has some. ``logits`` [batch, vocab] (device), in place."""
    for i, bad_words_ids in bad_words_token_ids.items():
        single_batch(logits[i], bad_words_ids, past_tokens_ids[i])
