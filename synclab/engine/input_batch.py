"""The async-scheduling bookkeeping of vLLM's ``InputBatch``: ``-1`` placeholders and their repair.

Taught in chapter 4 (reverse placeholder scans). Under async scheduling the host
schedules step *i+1* before step *i*'s sampled tokens are back. Each running
request's output list therefore gets a ``-1`` placeholder per token in flight
(under speculative decoding, one for the sampled token plus one per draft,
optimistically accepted).
When the sampling step needs the output history (penalties, bad words, some
logits processors), ``update_async_output_token_ids`` replaces the trailing
placeholders with the ids sampled last step. Names follow
``vllm/v1/worker/gpu_input_batch.py`` and ``gpu_model_runner.py``:

* :class:`CachedRequestState` — a request's state; its ``output_token_ids`` list
  is **the same object** as the batch's ``req_output_token_ids[i]``;
* :class:`InputBatch` — the batch, with ``prev_req_id_to_index`` (each request's
  row in last step's sampled tensor), ``sampled_token_ids_cpu`` and the event
  that says when that host copy is complete;
* :func:`append_placeholders` — what ``_bookkeeping_sync`` (one) and
  ``_update_states`` (one per draft) do;
The reader writes the repair in Exercise 4.1. The code before PR #42938, which the profile and the
capstone's switch run, is :mod:`synclab.engine.input_batch_baseline`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch



PLACEHOLDER = -1  # a real token id is never -1


@dataclass
class CachedRequestState:
    req_id: str
    prompt_token_ids: list[int]
    output_token_ids: list[int] = field(default_factory=list)  # shared with InputBatch.req_output_token_ids


@dataclass
class SamplingMetadata:
    output_token_ids: list[list[int]]  # one list per request, or [] when no sampler feature needs the history


class InputBatch:
    """The running requests of one step, in batch order."""

    def __init__(self) -> None:
        self.req_ids: list[str] = []
        self.req_output_token_ids: list[list[int]] = []  # the request states' own lists, not copies
        self.sampling_metadata = SamplingMetadata(self.req_output_token_ids)
        self.prev_req_id_to_index: dict[str, int] = {}  # req_id -> row of last step's sampled ids
        self.sampled_token_ids_cpu: torch.Tensor | None = None  # [prev_num_reqs, 1 + num_spec] int64 host, -1 padded
        self.async_copy_ready_event: Any = None  # a CUDA event recorded after that host copy

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    def add_request(self, request: CachedRequestState) -> None:
        self.req_ids.append(request.req_id)
        self.req_output_token_ids.append(request.output_token_ids)  # the reference, so updates reach the request

    def set_async_sampled_token_ids(self, sampled_token_ids_cpu: torch.Tensor, event: Any) -> None:
        """Keep last step's sampled ids (and their event) only if the sampler will read the output history."""
        if self.sampling_metadata.output_token_ids:
            self.sampled_token_ids_cpu, self.async_copy_ready_event = sampled_token_ids_cpu, event
        else:
            self.sampled_token_ids_cpu, self.async_copy_ready_event = None, None

    def update_async_output_token_ids(self) -> None:
        raise NotImplementedError


def append_placeholders(request: CachedRequestState, num_tokens: int = 1) -> None:
    """Extend the request's output with ``num_tokens`` placeholders: tokens sampled but not yet on the host."""
    request.output_token_ids.extend([PLACEHOLDER] * num_tokens)
