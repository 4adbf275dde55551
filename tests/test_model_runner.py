"""Chapter 2's engine pieces: the simulated streams, the platform switch, the miniature runner and its baseline."""

from __future__ import annotations

import random

import pytest
import torch

from synclab.device import SIM_DEVICE, has_cuda, is_pinned_host, to_device
from synclab.sim import cuda as sim_cuda
from synclab.engine.model_runner import (
    ModelRunnerOutput,
    SyncOutputRunner,
    TinyPoolingModel,
    _copy_pooler_output_to_cpu,
    make_pooling_batch,
)
from synclab.engine.platform import current_platform, forced_platform
from synclab.lazy_streams.checks import _pool_reference as pool_reference
from synclab.syncs import SyncKind, count_syncs

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def same_outputs(got, want) -> bool:
    return len(got) == len(want) and all(
        (g is None and w is None) or (g is not None and w is not None and torch.equal(g, w)) for g, w in zip(got, want))


# ----------------------------------------------------------------------------- simulated streams


def test_a_copy_holds_garbage_until_its_event_is_waited_for():
    x = to_device(torch.arange(4.0), SIM_DEVICE)
    with sim_cuda.simulated_cuda() as device:
        side = torch.cuda.Stream()
        event = torch.cuda.Event(blocking=True)
        with torch.cuda.stream(side):
            side.wait_stream(torch.cuda.current_stream())
            host = sim_cuda.copy_to_host_async(x)
            event.record()
        assert torch.cuda.current_stream() is device.default_stream  # the stream context was left
        assert bool((host == sim_cuda.GARBAGE).all()) and not event.query()
        event.synchronize()
        assert host.tolist() == [0.0, 1.0, 2.0, 3.0] and event.query()
        assert is_pinned_host(host)
    assert device.log.ops() == ["create stream", "wait_stream", "copy to host", "record event", "host waits"]
    assert device.streams_created == 1


def test_an_event_recorded_before_a_copy_does_not_cover_it():
    x = to_device(torch.ones(2), SIM_DEVICE)
    with sim_cuda.simulated_cuda():
        event = torch.cuda.Event()
        event.record()
        host = sim_cuda.copy_to_host_async(x)
        event.synchronize()
        assert bool((host == sim_cuda.GARBAGE).all())  # still in flight
        torch.cuda.synchronize()  # the whole device: everything lands
        assert host.tolist() == [1.0, 1.0]


def test_simulated_waits_are_counted_and_named():
    x = to_device(torch.ones(2), SIM_DEVICE)
    with sim_cuda.simulated_cuda():
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            host = sim_cuda.copy_to_host_async(x)
        event = torch.cuda.Event()
        event.record()
        with count_syncs(simulate=True) as report:
            stream.synchronize()
            event.synchronize()
            torch.cuda.synchronize()
        assert host.tolist() == [1.0, 1.0]
    # three kinds: CUDA's debug mode reports only the first (tests/test_syncs.py checks that on a GPU)
    assert [e.kind for e in report.events] == [SyncKind.STREAM_SYNC, SyncKind.EVENT_SYNC, SyncKind.DEVICE_SYNC]
    assert [e.kind.seen_by_cuda_debug_mode for e in report.events] == [True, False, False]
    assert "Stream.synchronize" in report.events[0].op and report.events[2].op == "torch.cuda.synchronize"
    assert report.events[0].filename.endswith("test_model_runner.py")  # the caller's line, not sim_cuda's


def test_the_simulation_is_undone_after_the_block():
    before = torch.cuda.Stream
    with sim_cuda.simulated_cuda():
        assert torch.cuda.Stream is sim_cuda.SimStream and current_platform.is_cuda_alike()
    assert torch.cuda.Stream is before and not sim_cuda.is_simulating()
    with pytest.raises(RuntimeError, match="only inside"):
        sim_cuda.SimEvent()


def test_copy_outside_a_simulation_is_a_plain_copy():
    x = to_device(torch.arange(3.0), SIM_DEVICE)
    assert sim_cuda.copy_to_host_async(x).tolist() == [0.0, 1.0, 2.0]


# ----------------------------------------------------------------------------- platform


def test_forced_platform_nests_and_restores():
    natural = current_platform.is_cuda_alike()
    assert natural == has_cuda()
    with forced_platform(False):
        assert not current_platform.is_cuda_alike()
        with forced_platform(True):
            assert current_platform.is_cuda_alike()
        assert not current_platform.is_cuda_alike()
    assert current_platform.is_cuda_alike() == natural


# ----------------------------------------------------------------------------- the runner


def test_copy_pooler_output_only_copies_finished_items():
    raw = [to_device(torch.ones(2), SIM_DEVICE), to_device(torch.zeros(2), SIM_DEVICE), None]
    out = _copy_pooler_output_to_cpu(raw, [True, False, True])
    assert out[0].tolist() == [1.0, 1.0] and out[1] is None and out[2] is None
    with pytest.raises(ValueError, match="2 pooled items for 3 requests"):
        _copy_pooler_output_to_cpu(raw[:2], [True, True, True])


@pytest.mark.parametrize("num_reqs", [0, 1, 7, 40])
def test_baseline_matches_the_reference(num_reqs):
    model = TinyPoolingModel(device=SIM_DEVICE)
    batch = make_pooling_batch(num_reqs, rng=random.Random(num_reqs), partial_fraction=0.3, device=SIM_DEVICE)
    want = pool_reference(model, batch)
    output = SyncOutputRunner(model).execute_model(batch)  # CPU platform: the copies are done on return
    assert isinstance(output, ModelRunnerOutput) and output.req_ids == batch.req_ids
    assert same_outputs(output.pooler_output, want)
    with sim_cuda.simulated_cuda() as device:
        with count_syncs(simulate=True) as report:
            output = SyncOutputRunner(model).execute_model(batch)
        assert same_outputs(output.pooler_output, want)  # landed by the device-wide wait
    assert [e.op for e in report.events] == ["torch.cuda.synchronize"]  # one wait per step, for everything
    assert device.streams_created == 0


def test_batches_have_unfinished_chunks_when_asked():
    batch = make_pooling_batch(200, rng=random.Random(0), partial_fraction=0.5, device=SIM_DEVICE)
    finished = batch.metadata.get_pooling_cursor().get_finished_mask()
    assert 40 < finished.count(False) < 160
    assert batch.input_ids.shape[0] == batch.num_scheduled_tokens == int(
        batch.metadata.get_pooling_cursor().num_scheduled_tokens_cpu.sum())


# ----------------------------------------------------------------------------- the output copy: one tensor per step


@pytest.mark.parametrize("finished,copied_rows", [([True] * 5, 5), ([True, False, True, False, False], 2),
                                                  ([False] * 5, 0)])
def test_a_pooled_tensor_goes_to_the_host_in_one_copy(finished, copied_rows):
    raw = to_device(torch.arange(5 * 3, dtype=torch.float32).reshape(5, 3), SIM_DEVICE)  # [num_reqs, hidden]
    with sim_cuda.simulated_cuda() as device, count_syncs(simulate=True) as report:
        host = _copy_pooler_output_to_cpu(raw, finished)
        copies = [detail for op, _, detail in device.log.entries if op == "copy to host"]
        torch.cuda.synchronize()
    assert copies == ([f"[{copied_rows}, 3] non_blocking"] if copied_rows else [])  # one copy, whatever the batch
    assert report.count == 1 and report.events[0].kind is SyncKind.DEVICE_SYNC  # only the wait the test asked for
    assert not report.staged  # the index of a partial batch goes up from pinned memory
    for got, row, done in zip(host, raw, finished):
        assert (got is None) == (not done)
        if done:
            assert torch.equal(got, row) and is_pinned_host(got)


def test_token_wise_outputs_are_copied_item_by_item():
    raw = [to_device(torch.ones(2, 3), SIM_DEVICE), None, to_device(torch.zeros(4, 3), SIM_DEVICE)]
    with sim_cuda.simulated_cuda() as device:
        host = _copy_pooler_output_to_cpu(raw, [True, False, True])
        torch.cuda.synchronize()
    assert device.log.ops().count("copy to host") == 2
    assert host[1] is None and torch.equal(host[0], torch.ones(2, 3)) and torch.equal(host[2], torch.zeros(4, 3))


def test_the_output_copy_refuses_a_mismatched_mask():
    with pytest.raises(ValueError, match="3 pooled items for 2 requests"):
        _copy_pooler_output_to_cpu(to_device(torch.ones(3, 2), SIM_DEVICE), [True, True])


# ----------------------------------------------------------------------------- races the simulated streams make visible


def _pinned(values):
    from synclab.sim.pinning import simulated_pinning

    with simulated_pinning(True):
        return torch.tensor(values, dtype=torch.float32).pin_memory()


def test_a_readers_own_non_blocking_download_holds_garbage_until_waited_for():
    x = to_device(torch.arange(4.0), SIM_DEVICE)
    with sim_cuda.simulated_cuda():
        host = x.to("cpu", non_blocking=True)  # torch gives it a pinned destination
        pinned = _pinned([0.0] * 4)
        pinned.copy_(x, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        early = host.tolist() + pinned.tolist()
        pageable = torch.empty(4)
        pageable.copy_(x, non_blocking=True)  # into pageable memory: synchronous, as on a GPU
        assert pageable.tolist() == [0.0, 1.0, 2.0, 3.0]
        event.synchronize()
    assert early == [sim_cuda.GARBAGE] * 8
    assert host.tolist() == pinned.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("waits_first,writes,races", [(True, True, 0), (False, True, 1), (False, False, 0)],
                         ids=["written after the wait", "written before any wait", "never written"])
def test_writing_a_pinned_buffer_before_its_upload_ran_is_a_race(waits_first, writes, races):
    staging = _pinned([1.0, 2.0])
    with sim_cuda.simulated_cuda() as device:
        on_device = staging.to(SIM_DEVICE, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        if waits_first:
            event.synchronize()
        if writes:
            staging.fill_(9.0)  # the next step's data, into the same staging buffer
    assert on_device.tolist() == [1.0, 2.0] and on_device is not staging
    assert len(device.races) == races
    if races:
        assert "test_model_runner.py" in device.races[0] and "RACE" in device.log.ops()


def test_wait_stream_edges_keep_their_direction():
    with sim_cuda.simulated_cuda() as device:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        torch.cuda.current_stream().wait_stream(side)
    assert [(e.waiter, e.waits_for) for e in device.edges] == [("side stream 1", "default"), ("default", "side stream 1")]
