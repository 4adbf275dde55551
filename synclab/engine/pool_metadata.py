"""vLLM's pooling metadata: ``PoolingCursor``, ``PoolingStates``, ``PoolingMetadata``.

Taught in chapter 1 (slice-then-split). The names, fields and edge cases follow
``vllm/v1/pool/metadata.py``; the code is the lab's own.

A pooling step works on a flat ``hidden_states`` tensor ``[num_tokens, hidden]``
holding the scheduled tokens of every request of the batch, request after
request. The cursor says where each request's tokens are: on the device
(``first_token_indices_gpu``, ``last_token_indices_gpu``, used by kernels) and on
the host (``num_scheduled_tokens_cpu``, ``prompt_lens_cpu``, ``seq_lens_cpu``,
used by Python). Keeping the host copies is what lets a pooler cut the batch
into requests without asking the device anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from synclab.device import DeviceLike, is_device_tensor, is_pin_memory_available, mark_like, to_device


@dataclass(frozen=True)
class PoolingParams:
    """The per-request pooling request; only the task matters here (``"token_embed"``, ``"classify"``, ...)."""

    task: str | None
    extra_kwargs: dict[str, Any] | None = None  # e.g. {"compressed_token_type_ids": 5} for a cross-encoder (chapter 3)


@dataclass
class PoolingCursor:
    """Where each request's scheduled tokens sit in the flat ``hidden_states`` of one step."""

    first_token_indices_gpu: torch.Tensor  # [num_reqs] int64 device: flat index of each request's first token
    last_token_indices_gpu: torch.Tensor  # [num_reqs] int64 device: flat index of each request's last token
    prompt_lens_cpu: torch.Tensor  # [num_reqs] int64 host
    seq_lens_cpu: torch.Tensor  # [num_reqs] int64 host: tokens computed after this step
    num_scheduled_tokens_cpu: torch.Tensor  # [num_reqs] int64 host: tokens of each request in this step
    partial_prefill: bool  # some request is not scheduled in full this step
    finished_mask: list[bool]  # [num_reqs]: the request's prompt completes this step

    def __len__(self) -> int:
        return len(self.finished_mask)

    def is_partial_prefill(self) -> bool:
        return self.partial_prefill

    def is_finished(self) -> torch.Tensor:
        return torch.tensor(self.finished_mask, dtype=torch.bool)  # [num_reqs] host

    def get_finished_mask(self) -> list[bool]:
        return self.finished_mask

    def __getitem__(self, indices: slice) -> PoolingCursor:
        """The cursor of a contiguous sub-group of requests: device tensors become views, no sync."""
        prompt_lens, seq_lens = self.prompt_lens_cpu[indices], self.seq_lens_cpu[indices]
        num_scheduled = self.num_scheduled_tokens_cpu[indices]
        return PoolingCursor(
            first_token_indices_gpu=mark_like(self.first_token_indices_gpu[indices], self.first_token_indices_gpu),
            last_token_indices_gpu=mark_like(self.last_token_indices_gpu[indices], self.last_token_indices_gpu),
            prompt_lens_cpu=prompt_lens,
            seq_lens_cpu=seq_lens,
            num_scheduled_tokens_cpu=num_scheduled,
            # recomputed from the host slices: the sub-group's own answer, still no device read
            partial_prefill=not torch.equal(prompt_lens, num_scheduled),
            finished_mask=torch.eq(prompt_lens, seq_lens).tolist(),
        )

    def shifted(self, token_offset: int) -> PoolingCursor:
        """The same cursor with its device indices rebased by ``-token_offset`` (queued on the device)."""
        first, last = self.first_token_indices_gpu, self.last_token_indices_gpu
        return replace(self, first_token_indices_gpu=mark_like(first - token_offset, first),
                       last_token_indices_gpu=mark_like(last - token_offset, last))


def query_start_loc_cpu(num_scheduled_tokens_cpu: torch.Tensor) -> torch.Tensor:
    """Where each request's tokens start in the flat batch, and the total: ``[0, n0, n0 + n1, ...]``.

    ``[num_reqs + 1]`` int64 in pinned host memory (where the platform has it), ready
    for a ``non_blocking`` upload: vLLM's runner keeps it as ``query_start_loc.cpu``.
    """
    starts = torch.zeros(len(num_scheduled_tokens_cpu) + 1, dtype=torch.int64, pin_memory=is_pin_memory_available())
    torch.cumsum(num_scheduled_tokens_cpu, dim=0, out=starts[1:])
    return starts


class PoolingStates:
    """Per-request state that outlives a step: the chunks of a prompt pooled so far (chunked prefill)."""

    def __init__(self) -> None:
        self.hidden_states_cache: list[torch.Tensor] = []  # each [chunk_tokens, hidden]

    def clean(self) -> None:
        self.hidden_states_cache.clear()

    def __repr__(self) -> str:
        return f"PoolingStates({len(self.hidden_states_cache)} cached chunks)"


@dataclass
class PoolingMetadata:
    """Everything a pooler needs about the batch besides the hidden states."""

    prompt_lens: torch.Tensor  # [num_reqs] int64 host
    pooling_params: list[PoolingParams]
    pooling_states: list[PoolingStates]
    pooling_cursor: PoolingCursor | None = None
    tasks: list[str] = field(init=False)

    def __post_init__(self) -> None:
        missing = [i for i, p in enumerate(self.pooling_params) if p.task is None]
        if missing:
            raise ValueError(f"pooling_params of requests {missing} have no task")
        self.tasks = [p.task for p in self.pooling_params]  # type: ignore[misc]

    def __len__(self) -> int:
        return len(self.pooling_params)

    def __getitem__(self, indices: slice) -> PoolingMetadata:
        return PoolingMetadata(
            prompt_lens=self.prompt_lens[indices],
            pooling_params=self.pooling_params[indices],
            pooling_states=self.pooling_states[indices],
            pooling_cursor=None if self.pooling_cursor is None else self.pooling_cursor[indices],
        )

    def get_pooling_cursor(self) -> PoolingCursor:
        if self.pooling_cursor is None:
            raise RuntimeError("build_pooling_cursor() was not called on this PoolingMetadata")
        return self.pooling_cursor

    def build_pooling_cursor(
        self,
        num_scheduled_tokens_cpu: torch.Tensor,
        seq_lens_cpu: torch.Tensor,
        device: DeviceLike | None = None,
        query_start_loc_gpu: torch.Tensor | None = None,
    ) -> None:
        """Fill in the cursor from host-side counts; the device indices are never read back.

        ``query_start_loc_gpu`` is what vLLM's runner passes: a view of its persistent
        ``query_start_loc`` device buffer (``[num_reqs + 1]``, the same cumulative sum,
        already uploaded with the step's inputs), so nothing is copied. Without it the
        cumulative sum is built in pinned host memory and uploaded ``non_blocking``.
        """
        n = len(self.prompt_lens)
        if len(num_scheduled_tokens_cpu) != n or len(seq_lens_cpu) != n:
            raise ValueError(f"{n} requests, but {len(num_scheduled_tokens_cpu)} scheduled counts "
                             f"and {len(seq_lens_cpu)} sequence lengths")
        if query_start_loc_gpu is not None:
            if len(query_start_loc_gpu) < n + 1 or not is_device_tensor(query_start_loc_gpu):
                raise ValueError(f"query_start_loc_gpu must be a device tensor of at least {n + 1} entries "
                                 f"(num_reqs + 1), got {len(query_start_loc_gpu)} entries"
                                 + ("" if is_device_tensor(query_start_loc_gpu) else " in host memory"))
            cumsum_gpu = mark_like(query_start_loc_gpu[:n + 1], query_start_loc_gpu)  # [num_reqs + 1] view
        else:
            cumsum = query_start_loc_cpu(num_scheduled_tokens_cpu)  # [num_reqs + 1] pinned host
            cumsum_gpu = to_device(cumsum, device, non_blocking=True)  # [num_reqs + 1] device: no wait
        self.pooling_cursor = PoolingCursor(
            first_token_indices_gpu=mark_like(cumsum_gpu[:n], cumsum_gpu),
            last_token_indices_gpu=mark_like(cumsum_gpu[1:] - 1, cumsum_gpu),
            prompt_lens_cpu=self.prompt_lens.clone(),
            seq_lens_cpu=seq_lens_cpu.clone(),
            num_scheduled_tokens_cpu=num_scheduled_tokens_cpu.clone(),
            partial_prefill=not torch.equal(self.prompt_lens, num_scheduled_tokens_cpu),
            finished_mask=torch.eq(self.prompt_lens, seq_lens_cpu).tolist(),
        )
