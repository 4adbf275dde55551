"""A miniature pooling model runner: vLLM's ``GPUModelRunner`` output path, in the lab's own code.

Taught in chapter 2 (lazy streams). After the forward pass, ``_pool`` turns the
hidden states into one pooled vector per finished request and hands them to the
host. Names follow ``vllm/v1/worker/gpu_model_runner.py``:

* :class:`ModelRunnerOutput` — what the engine gets back (host tensors);
* :func:`_copy_pooler_output_to_cpu` — the non-blocking copy of the finished items;
* :class:`PoolingModelRunner` — the runner: a small model, ``execute_model``,
  ``_sync_device``; subclasses write ``_pool``;
* :class:`SyncOutputRunner` — the baseline before PR #39113 (without async
  scheduling): copy, then wait for the whole device, every step.

The reader writes the asynchronous version in the chapter's lab (Exercise 2.1).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

import torch

from synclab.device import DeviceLike, has_cuda, is_pin_memory_available, pick_device, runs_on_device_process, to_device
from synclab.sim import cuda as sim_cuda
from synclab.engine.pool_metadata import PoolingMetadata, PoolingParams, PoolingStates, query_start_loc_cpu
from synclab.engine.pooler import LastPool, SequencePooler
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


@dataclass
class ModelRunnerOutput:
    req_ids: list[str]
    pooler_output: list[torch.Tensor | None] = field(default_factory=list)  # host tensors, one per request


class AsyncModelRunnerOutput(Protocol):
    """What a CUDA-like runner returns: the output is ready once ``get_output()`` returns."""

    def get_output(self) -> ModelRunnerOutput: ...


def _copy_pooler_output_to_cpu(raw: torch.Tensor | list[torch.Tensor | None],
                               finished_mask: list[bool]) -> list[torch.Tensor | None]:
    """Queue a non-blocking device-to-host copy of the finished requests' outputs (on the current stream).

    ``raw`` is what the pooler returned: one ``[num_reqs, hidden]`` tensor (a sequence
    pooler) or a list with one tensor (or ``None``) per request (token-wise poolers).
    A tensor goes over in **one** copy: the whole of it when every request finished, the
    finished rows gathered with ``index_select`` first otherwise (vLLM PR #35127). vLLM
    builds that index with ``torch.tensor(..., device=...)``, a synchronous copy; here it
    goes up from pinned memory without a wait (chapter 3's pattern).

    The host tensors are not valid until the copy is waited for: the caller must
    synchronise (an event recorded after the copies, or the device) before reading them.
    """
    num_reqs = len(finished_mask)
    if len(raw) != num_reqs:
        raise ValueError(f"{len(raw)} pooled items for {num_reqs} requests")
    if not isinstance(raw, torch.Tensor):
        return [sim_cuda.copy_to_host_async(item) if done and item is not None else None
                for item, done in zip(raw, finished_mask)]
    finished = [i for i, done in enumerate(finished_mask) if done]
    outputs: list[torch.Tensor | None] = [None] * num_reqs
    if not finished:
        return outputs
    if len(finished) == num_reqs:
        rows = raw  # [num_reqs, hidden] device
    else:
        index = torch.tensor(finished, dtype=torch.int64, pin_memory=is_pin_memory_available())  # [num_finished]
        rows = raw.index_select(0, to_device(index, raw.device, non_blocking=True))  # [num_finished, hidden]
    host = sim_cuda.copy_to_host_async(rows)  # [num_finished, hidden] pinned host: one copy
    for i, row in zip(finished, sim_cuda.host_rows(host)):
        outputs[i] = row
    return outputs


class TinyPoolingModel:
    """An embedding model small enough for a CPU: token embedding, ``num_layers`` dense layers, last-token pooling."""

    def __init__(self, vocab_size: int = 256, hidden_size: int = 32, num_layers: int = 2,
                 device: DeviceLike | None = None, seed: int = 0) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.device = device if device is not None else pick_device()
        self.embed = to_device(torch.randn(vocab_size, hidden_size, generator=gen), self.device)  # [vocab, hidden]
        scale = hidden_size ** -0.5
        self.layers = [to_device(torch.randn(hidden_size, hidden_size, generator=gen) * scale, self.device)
                       for _ in range(num_layers)]  # each [hidden, hidden]
        self.pooler = SequencePooler(LastPool(async_scheduling=True))  # [num_reqs, hidden] per step

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``input_ids`` [num_tokens] (device) -> hidden states [num_tokens, hidden] (device)."""
        x = self.embed[input_ids]
        for w in self.layers:
            x = torch.tanh(x @ w)
        return x


@dataclass
class PoolingBatch:
    """One step's scheduled work: the flat input ids and the metadata the pooler needs."""

    req_ids: list[str]
    input_ids: torch.Tensor  # [num_tokens] device
    num_scheduled_tokens: int
    metadata: PoolingMetadata


def make_pooling_batch(num_reqs: int, *, rng: random.Random, vocab_size: int = 256, max_len: int = 12,
                       partial_fraction: float = 0.0, device: DeviceLike | None = None, pad: int = 0) -> PoolingBatch:
    """Whole prompts, about ``partial_fraction`` of them unfinished chunks; ``pad`` ids after, as a CUDA graph pads."""
    prompt_lens, scheduled, computed = [], [], []
    for _ in range(num_reqs):
        n = rng.randrange(1, max_len + 1)
        chunk = rng.randrange(1, n) if n > 1 and rng.random() < partial_fraction else n
        prompt_lens.append(n)
        scheduled.append(chunk)
        computed.append(chunk)  # a first chunk: computed after this step == scheduled
    ids = torch.tensor([rng.randrange(vocab_size) for _ in range(sum(scheduled) + pad)], dtype=torch.int64)
    meta = PoolingMetadata(
        prompt_lens=torch.tensor(prompt_lens, dtype=torch.int64).reshape(num_reqs),
        pooling_params=[PoolingParams("embed")] * num_reqs,
        pooling_states=[PoolingStates() for _ in range(num_reqs)],
    )
    num_scheduled = torch.tensor(scheduled, dtype=torch.int64).reshape(num_reqs)  # [num_reqs] host
    # As vLLM's _prepare_inputs: query_start_loc goes up with the step's inputs, and the pooler's
    # cursor is a view of it (no second upload).
    query_start_loc_gpu = to_device(query_start_loc_cpu(num_scheduled), device, non_blocking=True)  # [num_reqs + 1]
    meta.build_pooling_cursor(num_scheduled, torch.tensor(computed, dtype=torch.int64).reshape(num_reqs), device,
                              query_start_loc_gpu=query_start_loc_gpu)
    return PoolingBatch([f"req-{i}" for i in range(num_reqs)], to_device(ids, device), sum(scheduled), meta)


class PoolingModelRunner:
    """The runner's output path. Subclasses write ``_pool``; everything else is vLLM's shape."""

    def __init__(self, model: TinyPoolingModel) -> None:
        self.model = model
        self.async_output_copy_stream: torch.cuda.Stream | None = None  # created on first use, if ever

    def _sync_device(self) -> None:
        """Wait for all work queued on the device (in the lab, a no-op on a CPU platform)."""
        if sim_cuda.is_simulating() or has_cuda() or runs_on_device_process():
            torch.cuda.synchronize()

    def execute_model(self, batch: PoolingBatch) -> ModelRunnerOutput | AsyncModelRunnerOutput:
        hidden_states = self.model.forward(batch.input_ids)  # [num_tokens, hidden] device, queued
        return self._pool(hidden_states, batch.num_scheduled_tokens, batch)

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int,
              batch: PoolingBatch) -> ModelRunnerOutput | AsyncModelRunnerOutput:
        raise NotImplementedError


class SyncOutputRunner(PoolingModelRunner):
    """``_pool`` without async scheduling before PR #39113: copy, then wait for the device.

    At #39113 pooling models ran with async scheduling by default; since #39592 they run without it.
    The lab's baseline reads the finished flags with ``get_finished_mask()`` (since #53464).
    """

    @answer_key("2.1", role="baseline (vLLM's code before #39113)", scope="checks", name="SyncOutputRunner._pool")
    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int, batch: PoolingBatch) -> ModelRunnerOutput:
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()  # host list
        output = ModelRunnerOutput(req_ids=list(batch.req_ids))
        output.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
        self._sync_device()  # the host waits for the forward pass AND the copies, every step
        return output
