"""A forward replayed from CUDA graphs, one per input shape (chapter 6, the capstone on a GPU).

An eager forward launches each layer's kernels from the host one at a time: the 8B-like model's 32 layers make about
twenty launches each per step. In a diagnostic run of the capstone on the H200 those launches, more than the
bookkeeping the chapters' fixes remove, set the pace of a decode step, and the device idled most of it. vLLM replays
a decode step's forward from CUDA graphs captured per batch size (``cudagraph_capture_sizes``; in v1 through
``CUDAGraphWrapper`` and its dispatcher since #20059, ``docs/design/cuda_graphs.md``), so that the host launches one
graph per step. The lab's capstone does the same where its model asks for it (``ModelConfig.cuda_graphs``), so that
what the fixes remove is what is left of the host's step.

A graph replays the kernels it recorded on the tensors it recorded: each call copies its inputs into the graph's own
(static) input tensors, replays, and returns a copy of the graph's output tensor, which the next replay overwrites
(a step's pooled views of it may still be read by its output copy on a side stream). Capturing
runs the function twice first (a warm-up on a side stream, as PyTorch's ``torch.cuda.graphs`` asks): the forward's
writes to the KV cache must be the same each time it runs on the same inputs, which they are (this step's keys and
values, at this step's rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import torch

MAX_GRAPHS = 8  # shapes captured at most; a step of another shape runs eagerly (vLLM: its capture sizes)
WARMUP_CALLS = 2  # eager calls before a capture: lazy initialisation (cuBLAS handles, workspaces) is not recorded


@dataclass
class Captured:
    """One recorded graph: its static inputs, its output tensor, and how to replay it."""

    inputs: tuple[torch.Tensor, ...]
    output: torch.Tensor
    replay: Callable[[], None]


class Capture(Protocol):
    def __call__(self, fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> Captured: ...


def cuda_capture(fn: Callable[..., torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> Captured:
    """Record ``fn(*inputs)`` in a CUDA graph, after :data:`WARMUP_CALLS` eager calls on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP_CALLS):
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = fn(*inputs)
    return Captured(inputs, output, graph.replay)


class GraphedForward:
    """``fn(*tensors)``, replayed from a graph per input shape and dtype; eager once :data:`MAX_GRAPHS` are taken or
    a capture has failed (its reason kept in :attr:`failure`, and said by :meth:`mode`)."""

    def __init__(self, fn: Callable[..., torch.Tensor], capture: Capture = cuda_capture,
                 max_graphs: int = MAX_GRAPHS) -> None:
        self.fn, self.capture, self.max_graphs = fn, capture, max_graphs
        self.graphs: dict[tuple[Any, ...], Captured] = {}
        self.eager_calls = 0
        self.failure: str | None = None

    def __call__(self, *tensors: torch.Tensor) -> torch.Tensor:
        key = tuple((tuple(t.shape), t.dtype) for t in tensors)
        graph = self.graphs.get(key)
        if graph is None:
            if self.failure is not None or len(self.graphs) >= self.max_graphs:
                self.eager_calls += 1
                return self.fn(*tensors)
            try:  # the graph's own inputs: copies, so that the caller's tensors stay the caller's
                graph = self.capture(self.fn, tuple(t.clone() for t in tensors))
            except Exception as exc:  # noqa: BLE001 - the run goes on eagerly, and says why
                self.failure = f"{type(exc).__name__}: {exc}"
                self.eager_calls += 1
                return self.fn(*tensors)
            self.graphs[key] = graph
        for static, given in zip(graph.inputs, tensors):
            static.copy_(given)
        graph.replay()
        # a copy: the next replay overwrites the graph's output, while views of this one (a step's pooled slices) may
        # still be on their way to the host on a side stream (chapter 2)
        return graph.output.clone()

    def mode(self) -> str:
        """How the forward ran, in words, for a bench's record."""
        if self.failure is not None:
            return f"eager: the CUDA graph's capture failed ({self.failure})"
        shapes = ", ".join(str(key[0][0][0]) for key in self.graphs)  # each graph's first input's first dim: tokens
        graphs = f"CUDA graphs, {len(self.graphs)} captured ({shapes} tokens a step)" if self.graphs else "eager"
        return graphs + (f", {self.eager_calls} eager calls of other shapes" if self.eager_calls else "")
