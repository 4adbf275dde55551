"""Tests for synclab.device on a CPU-only machine: the simulated device stands in for a GPU."""

from __future__ import annotations

import pytest
import torch

from synclab import device as dev
from synclab.device import (SIM_DEVICE, SimulatedDevice, device_name, has_cuda, is_cuda_alike, is_device_tensor,
                            is_pin_memory_available, is_simulated, mark_device, pick_device, synchronize,
                            to_device)

pytestmark = pytest.mark.sim  # the CPU-only machine: SYNCLAB_DEVICE=sim hides a GPU from the lab


def test_no_cuda_here():
    assert has_cuda() is False
    assert is_cuda_alike() is False
    assert device_name() == "cpu"
    synchronize()  # a no-op on the CPU, must not raise


def test_pick_device_is_the_simulated_cpu():
    device = pick_device()
    assert isinstance(device, SimulatedDevice)
    assert device is SIM_DEVICE
    assert device == "cpu"
    assert device.type == "cpu" and device.index is None
    assert repr(device) == "SimulatedDevice('cpu')"
    assert is_simulated(device)
    assert torch.zeros(2, device=device).device == torch.device("cpu")  # torch accepts it as a device


def test_is_simulated_only_for_the_simulated_device():
    assert not is_simulated("cpu")
    assert not is_simulated(torch.device("cpu"))


def test_to_device_returns_a_marked_copy():
    src = torch.arange(4.0)
    out = to_device(src)
    assert is_device_tensor(out)
    assert not is_device_tensor(src)  # the source stays a host tensor
    assert out is not src
    assert out.data_ptr() != src.data_ptr()
    assert torch.equal(out, src)
    out[0] = 100.0
    out += 1
    assert src.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("device", [SIM_DEVICE, "cpu", torch.device("cpu")])
def test_to_device_explicit_cpu_devices(device):
    out = to_device(torch.ones(2), device)
    assert is_device_tensor(out)
    assert out.device.type == "cpu"


def test_to_device_detaches():
    src = torch.ones(2, requires_grad=True)
    out = to_device(src)
    assert not out.requires_grad
    assert is_device_tensor(out)


def test_plain_cpu_tensor_is_not_a_device_tensor():
    assert is_device_tensor(torch.ones(3)) is False


def test_mark_device_marks_in_place():
    t = torch.ones(3)
    assert mark_device(t) is t
    assert is_device_tensor(t)
    assert not is_device_tensor(torch.ones(3))  # only that tensor


def test_no_pinned_memory_without_cuda():
    dev._pinning_works.cache_clear()
    assert is_pin_memory_available() is False


def test_host_wait_events_sleep_rather_than_spin():
    from synclab.device import host_wait_event
    from synclab.sim import cuda as sim_cuda

    with sim_cuda.simulated_cuda():
        assert host_wait_event().blocking and host_wait_event(enable_timing=True).blocking


@pytest.mark.parametrize("module,function", [("synclab.reverse_scan", "gpu_loop"), ("synclab.list_caches", "gpu_loop")])
def test_the_gpu_loops_wait_on_blocking_events_as_chapter_2_teaches(module, function):
    """Chapters 4 and 5 time their loops with the events chapter 2 teaches: no spinning torch.cuda.Event()."""
    import ast
    import importlib
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(importlib.import_module(module), function))))
    calls = [ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    assert "host_wait_event" in calls
    assert not [c for c in calls if c.endswith("cuda.Event")]


def test_the_simulated_gpu_puts_torch_back_as_it_found_it():
    """record_stream is the C base's: after a block torch.Tensor holds no copy of its own (a process that ran the
    engine would otherwise hold another torch than one that did not)."""
    from synclab.sim import cuda as sim_cuda

    own = "record_stream" in torch.Tensor.__dict__
    with sim_cuda.simulated_cuda():
        assert torch.Tensor.record_stream is not torch._C.TensorBase.record_stream
    assert ("record_stream" in torch.Tensor.__dict__) == own
    assert torch.Tensor.record_stream is torch._C.TensorBase.record_stream or own


def test_the_simulated_gpu_has_a_default_stream_as_cuda_has():
    """torch.cuda.default_stream() is a way to name the compute stream (chapter 2): outside a side-stream block it
    is the current stream, and inside one it still names the compute stream; put back after the block."""
    from synclab.sim import cuda as sim_cuda

    before = torch.cuda.default_stream
    with sim_cuda.simulated_cuda():
        compute = torch.cuda.default_stream()
        assert compute is torch.cuda.current_stream()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            assert torch.cuda.default_stream() is compute and torch.cuda.current_stream() is side
    assert torch.cuda.default_stream is before


def test_names_bound_before_the_simulated_gpu_reach_it_and_are_put_back():
    """``from torch.cuda import Stream, stream`` at the top of a cell, or a ``partial`` of ``torch.cuda.Event``, bind
    torch's own objects before any check runs: inside the block they build and use the simulated ones, as they would
    the real ones on a GPU; after it, torch's objects are as they were."""
    import functools

    from torch.cuda import Event, Stream, current_stream, stream

    from synclab.sim import cuda as sim_cuda

    blocking_event = functools.partial(torch.cuda.Event, blocking=True)
    codes = {f: f.__code__ for f in (stream, current_stream)}
    new = Stream.__dict__.get("__new__")
    with sim_cuda.simulated_cuda() as device:
        side, done = Stream(), blocking_event()
        with stream(side):
            side.wait_stream(current_stream())
            done.record()
        assert isinstance(side, sim_cuda.SimStream) and isinstance(Event(), sim_cuda.SimEvent)
        assert device.streams_created == 1 and device.log.ops() == ["create stream", "wait_stream", "record event"]
    assert all(f.__code__ is code for f, code in codes.items()) and Stream.__dict__.get("__new__") is new
    assert current_stream.__defaults__ == (None,)
    if not torch.cuda.is_available():  # torch's own Stream again: on a CPU-only machine, it refuses
        with pytest.raises(RuntimeError):
            Stream()


def test_inside_the_simulated_gpu_the_readers_code_sees_cuda_and_its_waits_count():
    """On the simulated device the reader's code meets CUDA as on a GPU: ``torch.cuda.is_available()`` says True (a
    name bound before the block too), so a "to be safe" ``torch.cuda.synchronize()`` behind it, or the lab's own
    ``synchronize()``, is taken and counted; the lab itself still knows there is no real GPU."""
    from torch.cuda import is_available

    from synclab.device import synchronize
    from synclab.sim import cuda as sim_cuda
    from synclab.syncs import count_syncs

    real = torch.cuda.is_available()
    with sim_cuda.simulated_cuda(), count_syncs(simulate=True) as report:
        assert torch.cuda.is_available() and is_available()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        synchronize()
        assert has_cuda() is False
    assert report.count == 2, report
    assert torch.cuda.is_available() == real and is_available() == real
