"""Chapter 2 (lazy streams): what the chapter runs: the inputs, the batches and steps, the runs the checks and the profiles share.

A room of :mod:`synclab.lazy_streams` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from synclab.device import TensorRef, simulated_device
from synclab.engine.model_runner import ModelRunnerOutput, PoolingBatch, PoolingModelRunner, TinyPoolingModel, make_pooling_batch
from synclab.engine.platform import forced_platform
from synclab.sim import cuda as sim_cuda


RunnerClass = Callable[[TinyPoolingModel], PoolingModelRunner]


# ----------------------------------------------------------------------------- running the reader's runner


def _same(got: list, want: list) -> bool:
    return len(got) == len(want) and all(
        (g is None and w is None) or (isinstance(g, torch.Tensor) and w is not None and g.shape == w.shape
                                      and torch.equal(g, w)) for g, w in zip(got, want))


def _first_difference(got: list, want: list) -> int | None:
    """The first index where two pooler outputs differ (where the shorter one ends, if that comes first); None when
    they are the same."""
    if _same(got, want):
        return None
    return next((i for i, (g, w) in enumerate(zip(got, want)) if not _same([g], [w])), min(len(got), len(want)))


def _describe(items: list, against: list | None = None, width: int = 4) -> str:
    """A pooler output in a line: ``width`` entries, from the start or, given ``against`` (the other side of a
    comparison), from just before the first entry where the two differ, so that the difference shows."""
    def one(t: Any) -> str:
        if t is None:
            return "None"
        if isinstance(t, torch.Tensor) and bool((t == sim_cuda.GARBAGE).all()):
            return "garbage (what the memory held: a copy not landed, or one that ran before its data was written)"
        return type(t).__name__ if not isinstance(t, torch.Tensor) else f"tensor{list(t.shape)}"
    start = 0
    first = _first_difference(items, against) if against is not None and len(items) > width else None
    if first is not None:
        start = max(0, min(first - 1, len(items) - width))
    shown = ", ".join(f"{start + i}: {one(t)}" if start else one(t) for i, t in enumerate(items[start:start + width]))
    return ("[" + ("..., " if start else "") + shown + (", ..." if start + width < len(items) else "") + "]"
            + (f" ({len(items)} entries)" if start else ""))


def resolve(result: Any) -> ModelRunnerOutput:
    """What the engine does with ``execute_model``'s result: wait for it if it is asynchronous."""
    return result.get_output() if hasattr(result, "get_output") else result


class _StreamSpy:
    """Stands for ``torch.cuda.Stream`` on a CPU platform: counts attempts and fails as torch does without CUDA."""

    created = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        type(self).created += 1
        raise RuntimeError("torch.cuda.Stream requires CUDA support")


@contextmanager
def cpu_platform() -> Iterator[type[_StreamSpy]]:
    """A CPU platform, on any machine: ``is_cuda_alike()`` and ``torch.cuda.is_available()`` are False, and creating
    a CUDA stream is recorded and fails (names bound before the block included)."""
    spy = type("StreamSpy", (_StreamSpy,), {"created": 0})
    originals = {"Stream": torch.cuda.Stream, "is_available": torch.cuda.is_available}
    torch.cuda.Stream = spy  # type: ignore[misc, assignment]
    torch.cuda.is_available = lambda: False
    try:
        with sim_cuda.names_bound_before(originals), forced_platform(False):
            yield spy
    finally:
        torch.cuda.Stream, torch.cuda.is_available = originals["Stream"], originals["is_available"]  # type: ignore


@contextmanager
def watch_pooler_outputs(model: TinyPoolingModel) -> Iterator[list[TensorRef]]:
    """Weak references to every device tensor the model's pooler returns in the block: are they freed, and when?"""
    refs: list[TensorRef] = []
    pooler = model.pooler

    def watched(hidden_states: torch.Tensor, metadata: Any) -> torch.Tensor | list:
        raw = pooler(hidden_states, metadata)
        items = [raw] if isinstance(raw, torch.Tensor) else [t for t in raw if t is not None]
        refs.extend(TensorRef(t) for t in items)
        return raw

    model.pooler = watched  # type: ignore[assignment]
    try:
        yield refs
    finally:
        model.pooler = pooler


def _batches(rng: random.Random, trials: int, device: Any = None) -> Iterator[tuple[str, PoolingBatch]]:
    """``trials`` random batches on ``device`` (the simulated device unless named): the same ``rng`` draws the same
    batches wherever they are made, so a check's references on the host match what a runner saw on the device."""
    device = simulated_device() if device is None else device
    for trial in range(trials):
        num_reqs = rng.choice([0, 1, 2, rng.randrange(1, 65)])
        partial = rng.choice([0.0, 0.3, 1.0])
        padding = rng.randint(1, 8) if trial % 2 else 0  # every other batch padded, as a CUDA graph's
        if padding and not num_reqs:
            num_reqs = rng.randrange(1, 65)
        batch = make_pooling_batch(num_reqs, rng=rng, partial_fraction=partial, device=device, pad=padding)
        unfinished = batch.metadata.get_pooling_cursor().get_finished_mask().count(False)
        padded = f", padded with {padding} rows past num_scheduled_tokens" if padding else ""
        yield f"random batch #{trial}: {num_reqs} request{'s' * (num_reqs != 1)}, {unfinished} of them unfinished chunks{padded}", batch


def _model(device: Any = None) -> TinyPoolingModel:
    """The chapter's model on ``device`` (the simulated device unless named): the same weights everywhere."""
    return TinyPoolingModel(device=simulated_device() if device is None else device)
