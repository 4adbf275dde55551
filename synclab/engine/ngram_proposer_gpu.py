"""The GPU n-gram proposer's state between steps (vLLM's ``vllm/v1/spec_decode/ngram_proposer_gpu.py``).

Taught in chapter 3 (pinned ``non_blocking`` transfers), Exercise 3.8. The GPU n-gram
proposer keeps every request's token ids on the device (``token_ids_gpu_tensor``
``[max_num_reqs, max_model_len]``) and writes each step's sampled tokens there, on the
device; the host's copy of those positions may still hold placeholders. Between
steps the persistent batch moves requests to other rows and takes new ones in, so
``update_ngram_gpu_tensors_incremental`` brings the device tensors in line:

* a request that moved has its row (and length) moved **on the device**: its newest
  tokens exist only there;
* a new (or resumed) request's row is copied from the host's pinned token table;
* every active row's length is refreshed from the host, the source of truth.

:func:`update_ngram_gpu_tensors_incremental_baseline` uploads the two reorder index
lists with ``torch.tensor(list, device=...)``, a synchronous copy each, as vLLM did
before PR #41429; the PR sends them through ``async_tensor_h2d`` (the reader's 3.1).
:func:`NgramInputBatch` holds the fields of vLLM's ``InputBatch`` that the update reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from synclab.device import DeviceLike, is_pin_memory_available
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


@dataclass
class CachedRequestState:
    """The one field of vLLM's request state the update reads."""

    req_id: str


@dataclass
class NgramInputBatch:
    """The fields of vLLM's ``InputBatch`` that ``update_ngram_gpu_tensors_incremental`` reads (all on the host)."""

    req_id_to_index: dict[str, int]  # this step's row of each request
    prev_req_id_to_index: dict[str, int] | None  # last step's rows; None before the first step
    num_tokens_no_spec: list[int]  # [max_num_reqs] tokens per row, without speculative ones
    token_ids_cpu_tensor: torch.Tensor  # [max_num_reqs, max_model_len] int32, pinned where available


def reorders(input_batch: NgramInputBatch, new_reqs: list[CachedRequestState]) -> tuple[list[int], list[int]]:
    """Rows of the requests that moved since last step: (previous rows, current rows). New requests never move."""
    new_req_ids = {req.req_id for req in new_reqs}
    prev = input_batch.prev_req_id_to_index or {}
    reorder_src, reorder_dst = [], []
    for req_id, curr_idx in input_batch.req_id_to_index.items():
        prev_idx = prev.get(req_id)
        if req_id not in new_req_ids and prev_idx is not None and prev_idx != curr_idx:
            reorder_src.append(prev_idx)
            reorder_dst.append(curr_idx)
    return reorder_src, reorder_dst


def _upload(values: list[int], dtype: torch.dtype, device: DeviceLike) -> torch.Tensor:
    pinned = torch.tensor(values, dtype=dtype, pin_memory=is_pin_memory_available())
    return pinned.to(device, non_blocking=True)


@answer_key("3.8", role="vLLM's code before #41429", scope="checks")
def update_ngram_gpu_tensors_incremental_baseline(input_batch: NgramInputBatch, token_ids_gpu_tensor: torch.Tensor,
                                                  num_tokens_no_spec_gpu: torch.Tensor,
                                                  new_reqs: list[CachedRequestState], device: DeviceLike) -> None:
    """Before PR #41429: the reorder indices go up with ``torch.tensor(list, device=...)``, two syncs a step."""
    curr_req_id_to_index = input_batch.req_id_to_index
    if not curr_req_id_to_index:
        return
    active_indices = list(curr_req_id_to_index.values())
    new_req_ids = {req.req_id for req in new_reqs}
    first_step = input_batch.prev_req_id_to_index is None
    if not first_step:
        reorder_src, reorder_dst = reorders(input_batch, new_reqs)
        if reorder_src:
            src_tensor = torch.tensor(reorder_src, dtype=torch.long, device=device)  # a synchronous copy
            dst_tensor = torch.tensor(reorder_dst, dtype=torch.long, device=device)  # and another
            temp_token_ids = token_ids_gpu_tensor[src_tensor].clone()  # [n_moved, max_len]
            temp_num_tokens = num_tokens_no_spec_gpu[src_tensor].clone()  # [n_moved]
            token_ids_gpu_tensor[dst_tensor] = temp_token_ids
            num_tokens_no_spec_gpu[dst_tensor] = temp_num_tokens
    for req_id, idx in curr_req_id_to_index.items():
        num_tokens = input_batch.num_tokens_no_spec[idx]
        if (first_step or req_id in new_req_ids) and num_tokens > 0:
            token_ids_gpu_tensor[idx, :num_tokens].copy_(input_batch.token_ids_cpu_tensor[idx, :num_tokens],
                                                          non_blocking=True)
    active_idx_gpu = _upload(active_indices, torch.long, device)  # [n_active]
    lengths = [input_batch.num_tokens_no_spec[i] for i in active_indices]
    num_tokens_no_spec_gpu.index_copy_(0, active_idx_gpu, _upload(lengths, num_tokens_no_spec_gpu.dtype, device))
