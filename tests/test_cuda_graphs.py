"""The capstone's forward replayed from CUDA graphs (synclab/engine/cuda_graphs.py).

On a CPU a stand-in capture plays the graph's part: it records the function and, at each replay, runs it again on the
graph's own inputs and writes the result into the output it returned at capture, as a CUDA graph does. The lab's model
runs through it step after step and must give what an eager twin gives: the warm-up calls and the capture write the
KV cache too, and must not change what a step computes. On a GPU the same comparison runs on a real graph.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from synclab.engine.cuda_graphs import WARMUP_CALLS, Captured, GraphedForward
from synclab.engine.tiny_llm import CPU_MODEL, TinyDecoder

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def stand_in_capture(fn, inputs):
    """A CUDA graph's behaviour, on any device: warm-up calls, one call at capture whose output tensor every replay
    overwrites with the function's result on the (static) inputs."""
    for _ in range(WARMUP_CALLS):
        fn(*inputs)
    output = fn(*inputs)
    return Captured(inputs, output, lambda: output.copy_(fn(*inputs)))


def test_a_graph_per_shape_replays_on_new_inputs_and_keeps_the_callers_tensors():
    graphed = GraphedForward(lambda x: x * 2 + 1, capture=stand_in_capture)
    a, b = torch.arange(4.0), torch.arange(4.0, 8.0)
    first = graphed(a).clone()
    assert torch.equal(first, a * 2 + 1) and torch.equal(graphed(b), b * 2 + 1)
    (graph,) = graphed.graphs.values()
    assert graph.inputs[0] is not b and graph.inputs[0] is not a  # the graph's own input, a copy of the caller's
    assert torch.equal(graphed(torch.ones(3)), torch.full((3,), 3.0)) and len(graphed.graphs) == 2
    assert graphed.mode() == "CUDA graphs, 2 captured (4, 3 tokens a step)"


def test_past_its_graphs_or_after_a_failed_capture_the_forward_runs_eagerly_and_says_so():
    graphed = GraphedForward(lambda x: x + 1, capture=stand_in_capture, max_graphs=1)
    graphed(torch.zeros(2))
    assert torch.equal(graphed(torch.zeros(5)), torch.ones(5))  # a second shape, past max_graphs: eager
    assert graphed.mode() == "CUDA graphs, 1 captured (2 tokens a step), 1 eager calls of other shapes"

    def fails(fn, inputs):
        raise RuntimeError("operation not permitted when stream is capturing")

    broken = GraphedForward(lambda x: x + 1, capture=fails)
    assert torch.equal(broken(torch.zeros(2)), torch.ones(2)) and broken.graphs == {}
    assert broken.mode() == ("eager: the CUDA graph's capture failed "
                             "(RuntimeError: operation not permitted when stream is capturing)")


def _steps(model: TinyDecoder, steps: int = 5) -> list[torch.Tensor]:
    """Decode ``steps`` steps of 3 requests in slots 0-2 of a windowed model: each step's hidden states."""
    gen = torch.Generator().manual_seed(0)
    slots = torch.tensor([0, 1, 2])
    out = []
    for step in range(steps):
        x = torch.randn(3, model.config.hidden_size, generator=gen)
        positions = torch.tensor([step, step + 5, step + 70])  # the third past the window: the ring wraps
        out.append(model(x, slots, positions, max_len=step + 71).clone())
    return out


def test_the_models_graphed_forward_computes_what_its_eager_twin_computes():
    """The warm-up and the capture run the forward too, writing this step's keys and values again: the same ones, so
    a step sees what an eager step sees."""
    config = replace(CPU_MODEL, sliding_window=True, max_model_len=64)
    eager, graphed = TinyDecoder(config, "cpu"), TinyDecoder(config, "cpu")
    assert graphed.graphed is None and graphed.forward_mode() == "eager"  # not on a CPU, even when asked
    graphed.graphed = GraphedForward(graphed._windowed_forward, capture=stand_in_capture)
    for want, got in zip(_steps(eager), _steps(graphed)):
        torch.testing.assert_close(got, want)
    assert len(graphed.graphed.graphs) == 1 and graphed.graphed.eager_calls == 0


def test_a_forward_that_keeps_state_between_calls_would_differ_and_the_comparison_sees_it():
    """The comparison above can fail: a forward whose every call moves its state on (a counter in the cache) gives
    other results once the warm-up and the capture have run it."""
    state = torch.zeros(1)

    def drifting(x):
        state.add_(1)
        return x + state

    graphed = GraphedForward(drifting, capture=stand_in_capture)
    assert not torch.equal(graphed(torch.zeros(1)), torch.ones(1))


@pytest.mark.cuda
def test_on_a_gpu_the_real_graph_computes_what_the_eager_forward_computes():
    config = replace(CPU_MODEL, sliding_window=True, max_model_len=64, cuda_graphs=True)
    eager = TinyDecoder(replace(config, cuda_graphs=False), "cuda")
    graphed = TinyDecoder(config, "cuda")
    assert graphed.graphed is not None
    gen = torch.Generator().manual_seed(0)
    slots = torch.tensor([0, 1, 2], device="cuda")
    for step in range(5):
        x = torch.randn(3, config.hidden_size, generator=gen).cuda()
        positions = torch.tensor([step, step + 5, step + 70], device="cuda")
        torch.testing.assert_close(graphed(x, slots, positions, step + 71), eager(x, slots, positions, step + 71))
    assert graphed.forward_mode() == "CUDA graphs, 1 captured (3 tokens a step)", graphed.forward_mode()
