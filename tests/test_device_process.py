"""The device process (synclab/sim/device_process/): the data in a process of its own, every transfer counted there.

Steps 1-3 of its plan (CONTRIBUTING, "The device process"): a tensor of metadata in the reader's process whose ops
run on the data in the device process; the sync table's reads each one transfer of its kind with the reader's line,
the other ops none; the counts out of the reader's reach; factories and uploads by the device's name; pinned
buffers that a copy lands in when its stream runs; streams and events whose work runs only when the host waits on
them, and a stream that uses data no wait ordered it after (or memory freed on another stream) recorded as a race.
Step 6 begun: the in-process device's sync table, routes and refusals (tests/test_syncs.py) row by row, and the
capstone's engine step by step, count the same on it. Step 5 begun: a process handed the reader's end alone is
counted where another process reads the counts, and cannot read, lower or stop them. The lab does not use it yet.
"""

from __future__ import annotations

import gc
import os
import re
from typing import Iterator

import numpy as np
import pytest
import torch

from synclab.sim.device_process.handle import DeviceTensor, SimulatedGPU
from synclab.sim.device_process.ledger import Ledger
from synclab.sim.device_process.machine import running_on
from synclab.syncs import IN_FLIGHT, SyncKind
from tests.test_syncs import REFUSED, ROUTES, TABLE, make_env

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


@pytest.fixture(scope="module")
def gpu() -> Iterator[SimulatedGPU]:
    device = SimulatedGPU()
    yield device
    device.close()
    assert not device.process.is_alive()


def transfers_made_by(gpu: SimulatedGPU, run) -> list:
    before = len(gpu.ledger().transfers)
    run()
    return gpu.ledger().transfers[before:]


HOST = torch.arange(24, dtype=torch.float32).reshape(4, 6)  # [4, 6]

# ops that read nothing back: the same values on the device as on the host, and no transfer
SAME_VALUES = {
    "arithmetic": lambda x: (x * 2 + 1) / 3,
    "a reduction": lambda x: x.sum(0),
    "a slice and a view": lambda x: x[1:3].reshape(-1),
    "an int index": lambda x: x[2],
    "split by sizes on the host": lambda x: x.split([1, 3])[1],
    "cat": lambda x: torch.cat([x, x[:1]]),
    "a comparison": lambda x: x > 5,
    "argmax": lambda x: x.argmax(dim=1),
    "a matmul": lambda x: x @ x.T,
    "in place": lambda x: x.clone().add_(1),
    "where with three tensors": lambda x: torch.where(x > 5, x, -x),
}


@pytest.mark.parametrize("name", SAME_VALUES)
def test_an_op_gives_the_hosts_values_and_metadata_and_reads_nothing_back(gpu: SimulatedGPU, name: str) -> None:
    op = SAME_VALUES[name]
    expected = op(HOST.clone())
    results = []
    moved = transfers_made_by(gpu, lambda: results.append(op(gpu.upload(HOST, blocking=False))))
    (out,) = results
    assert isinstance(out, DeviceTensor) and out.device.type == "simgpu" and out.is_cuda is False
    assert (out.shape, out.dtype) == (expected.shape, expected.dtype)
    assert moved == []  # an op on the device waits for nothing
    assert torch.equal(out.cpu(), expected)


READS = {  # the sync table's reads: each one transfer, of its kind
    SyncKind.ITEM: lambda x: x[0, 1].item(),
    SyncKind.TOLIST: lambda x: x[1].tolist(),
    SyncKind.BOOL: lambda x: bool(x[0, 0]),
    SyncKind.PRINT: lambda x: f"{x[0, :2]!r}",
    SyncKind.D2H_COPY: lambda x: x.cpu(),
    SyncKind.NONZERO: lambda x: (x > 20).nonzero(),
    SyncKind.BOOL_MASK_INDEX: lambda x: x[x > 20],
}


@pytest.mark.parametrize("kind", READS, ids=lambda k: k.name)
def test_a_read_is_one_transfer_of_its_kind_with_the_readers_line(gpu: SimulatedGPU, kind: SyncKind) -> None:
    x = gpu.upload(HOST, blocking=False)
    got = []
    moved = transfers_made_by(gpu, lambda: got.append(READS[kind](x)))
    assert [t.kind for t in moved] == [kind.value], moved
    assert "test_device_process.py" in moved[0].where and "lambda x:" in moved[0].where  # the reader's line


def test_values_read_back_are_the_hosts(gpu: SimulatedGPU) -> None:
    x = gpu.upload(HOST, blocking=False)
    assert x[0, 1].item() == 1.0 and x[1].tolist() == HOST[1].tolist() and bool(x[0, 0]) is False
    assert int(x[3, 5]) == 23 and float(x.sum()) == float(HOST.sum())
    assert torch.equal((x > 20).nonzero().cpu(), (HOST > 20).nonzero())
    assert torch.equal(x[x > 20].cpu(), HOST[HOST > 20]) and x[x > 20].shape == (3,)
    assert "device='simgpu:0'" in repr(x[0, :2])


def test_a_blocking_upload_is_a_synchronous_copy_and_a_queued_one_is_none(gpu: SimulatedGPU) -> None:
    assert [t.kind for t in transfers_made_by(gpu, lambda: gpu.upload(HOST))] == [SyncKind.H2D_COPY.value]
    assert transfers_made_by(gpu, lambda: gpu.upload(HOST, blocking=False)) == []


def test_a_queued_ops_error_surfaces_at_the_next_transfer(gpu: SimulatedGPU) -> None:
    fresh = SimulatedGPU()  # a failed op stays this device's error, as a CUDA error does
    try:
        x = fresh.upload(torch.arange(4), blocking=False)
        y = x.to(torch.float32)
        fresh.send(("op", "aten::no_such_op", (), {}, []))
        with pytest.raises(RuntimeError, match="an op queued earlier failed on the device"):
            y.sum().item()
        with pytest.raises(RuntimeError, match="every later transfer fails too: restart the kernel"):
            fresh.upload(torch.arange(2)).tolist()  # a new tensor's read as well: the device stays failed
    finally:
        fresh.close()


def test_nothing_the_readers_connection_sends_lowers_a_count(gpu: SimulatedGPU) -> None:
    """The counts live in the device process: the reader's process holds no ledger, and its connection has no message
    that resets, edits or reads one."""
    x = gpu.upload(HOST, blocking=False)
    x.sum().item()
    counted = gpu.ledger()  # a copy, which the watcher holds
    transfers, ops = counted.transfers, counted.ops
    del counted
    assert not [o for o in gc.get_objects() if type(o) is Ledger]  # none in this process
    for forged in (("reset",), ("ledger",), ("stop",), ("batch", [("reset",)]), ("free", list(range(10**4))),
                   "not a message"):
        gpu._send(forged)  # as the reader's side frames a message
        gpu._conn.send(forged)  # and unframed
    x2 = gpu.upload(HOST, blocking=False)
    x2.sum().item()
    counted = gpu.ledger()
    after, ops_after = counted.transfers, counted.ops
    assert after[:len(transfers)] == transfers and len(after) == len(transfers) + 1 and ops_after > ops
    assert gpu.process.is_alive()


def test_a_mode_counting_calls_sees_a_device_tensors_indexing_and_reads_beside_the_machines_own(
        gpu: SimulatedGPU) -> None:
    """The machine's own mode alone lets indexing and reads skip a second pass; a mode that counts the host's
    calls beside it still sees each, as it sees them on a CUDA tensor."""
    from synclab.dispatch import count_torch_calls

    with running_on(gpu):
        x = torch.arange(4, device="simgpu")
        with count_torch_calls() as calls:
            x[1:3]
            x[0] = 7
            x.tolist()
    assert {"__getitem__", "__setitem__", "tolist"} <= set(calls.by_name), calls


def test_einsum_goes_to_the_device_as_one_op_with_the_hosts_values(gpu: SimulatedGPU) -> None:
    """torch decomposes einsum into a dozen ops before a device sees it; on the machine it crosses as one (a GPU runs
    it as one launch sequence), with the values the host computes, and a mode counting calls sees one call."""
    from synclab.dispatch import count_torch_calls

    q, k = torch.arange(24.0).reshape(2, 3, 4), torch.arange(48.0).reshape(2, 2, 3, 4)
    with running_on(gpu):
        q_dev, k_dev = gpu.upload(q, blocking=False), gpu.upload(k, blocking=False)
        before = gpu.ledger().ops
        with count_torch_calls() as calls:
            scores = torch.einsum("thd,tlhd->thl", q_dev, k_dev)
        ops = gpu.ledger().ops - before
    assert ops == 1 and calls.by_name["einsum"] == 1
    assert torch.equal(scores.cpu(), torch.einsum("thd,tlhd->thl", q, k))


def test_torch_tensor_refuses_to_pin_a_tensor_or_an_array_on_the_machine_too(gpu: SimulatedGPU) -> None:
    with running_on(gpu):
        for data, said in ((torch.arange(4), "from a variable"), (np.arange(4), "from numpy")):
            with pytest.raises(RuntimeError, match=f"Can't pin tensor constructed {said}"):
                torch.tensor(data, pin_memory=True)
        assert torch.tensor([1, 2], pin_memory=True).is_pinned()


def _a_reader_that_cheats(reader, results) -> None:
    """A process handed only the reader's end (as a grader's answer process will be): it reads three values, then
    tries every way its side has to lower, read or stop the counts."""
    gpu = SimulatedGPU(reader)
    x = gpu.upload(HOST, blocking=False)
    x.sum().item(), x[0, 0].item(), x.tolist()  # three reads: item, item, tolist
    found = []
    for ask in (gpu.ledger, gpu.transfer_count, lambda: gpu.transfers_since(0)):
        try:
            ask()
            found.append("read the counts")
        except RuntimeError as exc:
            found.append(str(exc))
    for forged in (("reset",), ("ledger",), ("stop",), ("since", 0), ("batch", [("stop",)])):
        gpu._send(forged, asks=True)
        gpu._conn.recv()  # answered with the error: no such message on this connection
    gpu._watched.clear()
    gpu.close()
    results.send(found)


def test_a_process_handed_only_the_readers_end_cannot_read_or_lower_the_counts() -> None:
    """The grader's side (step 5): one process starts the device and keeps its watcher; another gets the reader's end.
    Its transfers are counted where the first can read them, and nothing it sends reads, lowers or stops them."""
    import multiprocessing

    from synclab.sim.device_process.handle import start_device

    reader, watcher = start_device()
    context = multiprocessing.get_context("spawn")
    results, results_there = context.Pipe()
    child = context.Process(target=_a_reader_that_cheats, args=(reader, results_there))
    child.start()
    reader.close()
    results_there.close()
    try:
        assert results.poll(120), "the reader's process did not answer"
        found = results.recv()
        child.join(timeout=60)
        transfers = watcher.ask(("since", 0))
        assert [t.kind for t in transfers] == [SyncKind.ITEM.value, SyncKind.ITEM.value, SyncKind.TOLIST.value]
        assert all("_a_reader_that_cheats" in t.where or "test_device_process.py" in t.where for t in transfers)
        assert found == ["this process holds only the reader's end of the simulated GPU: its counts are read by the "
                         "process that started it, as a GPU's driver, not the program, sees its transfers"] * 3
        assert watcher.process.is_alive() and child.exitcode == 0
    finally:
        watcher.stop()
    assert not watcher.process.is_alive()


# ----------------------------------------------------------------------------- step 2: by the device's name

MADE = {  # a factory given the device's name: the host's values, no transfer
    "empty then zero_": (lambda d: torch.zeros(2, 3, device=d), torch.zeros(2, 3)),
    "arange": (lambda d: torch.arange(5, device=d), torch.arange(5)),
    "arange with a step": (lambda d: torch.arange(2, 9, 3, device=d), torch.arange(2, 9, 3)),
    "full": (lambda d: torch.full((2,), 7, device=d), torch.full((2,), 7)),
    "linspace": (lambda d: torch.linspace(0, 1, 5, device=d), torch.linspace(0, 1, 5)),
    "a 0-d host tensor is a scalar": (lambda d: torch.arange(3, device=d) + torch.tensor(2), torch.arange(3) + 2),
}


@pytest.mark.parametrize("name", MADE)
def test_a_factory_by_the_devices_name_makes_a_device_tensor_and_moves_nothing(gpu: SimulatedGPU, name: str) -> None:
    make, expected = MADE[name]
    made = []
    assert transfers_made_by(gpu, lambda: made.append(make("simgpu"))) == []
    assert isinstance(made[0], DeviceTensor) and made[0].device == gpu.device
    assert torch.equal(made[0].cpu(), expected)


UPLOADS = {  # the host's values going up: the kind the sync table gives each
    "torch.tensor(list, device=...)": (lambda d: torch.tensor([1, 2, 3], device=d), SyncKind.H2D_COPY),
    "t.to(device)": (lambda d: torch.ones(4).to(d), SyncKind.H2D_COPY),
    "t.to(device, non_blocking=True) from pageable memory": (lambda d: torch.ones(4).to(d, non_blocking=True),
                                                             SyncKind.STAGED_COPY),
    "device[host index]": (lambda d: torch.arange(5, device=d)[torch.tensor([0, 3])], SyncKind.H2D_COPY),
    "device.copy_(host)": (lambda d: torch.zeros(3, device=d).copy_(torch.ones(3)), SyncKind.H2D_COPY),
}


@pytest.mark.parametrize("name", UPLOADS)
def test_an_upload_is_counted_as_the_sync_table_says(gpu: SimulatedGPU, name: str) -> None:
    upload, kind = UPLOADS[name]
    made = []
    moved = transfers_made_by(gpu, lambda: made.append(upload("simgpu")))
    assert [t.kind for t in moved] == [kind.value], moved
    made[0].cpu()  # and the values arrived


def test_a_host_tensor_beside_device_tensors_is_refused_as_cuda_refuses_it(gpu: SimulatedGPU) -> None:
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.arange(5, device="simgpu") + torch.ones(5)


def test_a_factory_with_no_gpu_running_says_to_start_one(monkeypatch) -> None:
    from synclab.sim.device_process import handle

    monkeypatch.setattr(handle, "_STARTED", [])
    with pytest.raises(RuntimeError, match=r"no simulated GPU is running: start one \(SimulatedGPU\(\)\)"):
        handle.current_gpu()


RESIZED = {  # ops that change a tensor's size in place: the host's metadata follows, cached or not
    "resize_": (lambda d: torch.zeros(3, device=d).resize_(2, 2).fill_(1), torch.ones(2, 2)),
    "an out= op": (lambda d: torch.add(torch.ones(4, device=d), 1, out=torch.empty(0, device=d)), torch.full((4,), 2.0)),
    "arange into a buffer": (lambda d: torch.arange(3, out=torch.empty(0, dtype=torch.long, device=d)),
                             torch.arange(3)),
}


@pytest.mark.parametrize("name", RESIZED)
def test_an_op_that_resizes_a_tensor_in_place_moves_its_metadata_too(gpu: SimulatedGPU, name: str) -> None:
    make, expected = RESIZED[name]
    for _ in range(2):  # the second time the op's metadata comes from the cache
        out = make("simgpu")
        assert out.shape == expected.shape and out.stride() == expected.stride() and out.numel() == expected.numel()
        assert torch.equal(out.cpu(), expected)


# ----------------------------------------------------------------------------- step 3: pinned memory and waits


def test_a_download_into_pinned_memory_lands_at_the_next_wait_and_waits_for_nothing(gpu: SimulatedGPU) -> None:
    x = torch.arange(1, 5, device="simgpu")
    buffer = gpu.pinned((4,), torch.int64)
    moved = transfers_made_by(gpu, lambda: buffer.copy_(x, non_blocking=True))
    assert moved == [] and buffer.tolist() == [0, 0, 0, 0]  # not landed: the memory holds what it held
    assert [t.kind for t in transfers_made_by(gpu, gpu.synchronize)] == [SyncKind.DEVICE_SYNC.value]
    assert buffer.tolist() == [1, 2, 3, 4]


def test_to_the_host_non_blocking_makes_a_pinned_buffer_that_a_later_wait_fills(gpu: SimulatedGPU) -> None:
    x = torch.arange(1, 4, device="simgpu")
    early = []
    assert transfers_made_by(gpu, lambda: early.append(x.to("cpu", non_blocking=True))) == []
    assert early[0].tolist() == [IN_FLIGHT] * 3  # read before it landed: what such memory holds, a race, no sync
    x.sum().item()  # any wait for the device lands it
    assert early[0].tolist() == [1, 2, 3]


def test_a_non_blocking_download_into_pageable_memory_is_a_wait(gpu: SimulatedGPU) -> None:
    x = torch.arange(1, 4, device="simgpu")
    pageable = torch.zeros(3, dtype=torch.int64)
    moved = transfers_made_by(gpu, lambda: pageable.copy_(x, non_blocking=True))
    assert [t.kind for t in moved] == [SyncKind.PAGEABLE_D2H.value] and pageable.tolist() == [1, 2, 3]


@pytest.mark.parametrize("wait_first", [False, True], ids=["refilled before the upload ran", "refilled after a wait"])
def test_an_upload_from_pinned_memory_reads_the_buffer_when_it_runs(gpu: SimulatedGPU, wait_first: bool) -> None:
    """The staging race: a pinned buffer refilled before its non_blocking upload ran sends the new values, and the
    device names the write (a write through a view of the buffer too); after a wait the buffer is the host's again."""
    staging = gpu.pinned((3,), torch.int64)
    staging.copy_(torch.tensor([1, 2, 3]))
    target = torch.zeros(3, dtype=torch.int64, device="simgpu")
    races_before = len(gpu.ledger().races)
    assert transfers_made_by(gpu, lambda: target.copy_(staging, non_blocking=True)) == []
    if wait_first:
        gpu.synchronize()
    staging[1:].copy_(torch.tensor([8, 9]))  # the next step's values
    assert target.tolist() == ([1, 2, 3] if wait_first else [1, 8, 9])
    races = gpu.ledger().races[races_before:]
    assert races == [] if wait_first else (len(races) == 1 and "wrote a pinned buffer before its upload ran" in races[0]
                                           and "test_device_process.py" in races[0])


def test_a_buffer_refilled_then_dropped_before_its_upload_ran_is_still_a_race(gpu: SimulatedGPU) -> None:
    """A function that fills a pinned buffer, queues its upload, writes it again and returns: the buffer is gone from
    the host's code before anything waits, yet the device reads it when the upload runs (the caching host allocator
    holds it until then), so the write is a race all the same."""
    def gather(target: torch.Tensor) -> None:
        mask = torch.zeros(2, 3, dtype=torch.bool).pin_memory()
        target.copy_(mask, non_blocking=True)
        mask[:, 0] = True  # after the upload: too late

    target = torch.zeros(2, 3, dtype=torch.bool, device="simgpu")
    races_before = len(gpu.ledger().races)
    gather(target)
    gc.collect()
    assert target[:, 0].tolist() == [True, True]  # what the memory held when the upload ran
    races = gpu.ledger().races[races_before:]
    assert len(races) == 1 and "wrote a pinned buffer before its upload ran" in races[0]


def test_t_pin_memory_keeps_the_layout_as_torch_does(gpu: SimulatedGPU) -> None:
    transposed = torch.arange(6.0).reshape(2, 3).t()
    pinned = transposed.pin_memory()
    assert pinned.is_pinned() and pinned.stride() == transposed.stride() and pinned.tolist() == transposed.tolist()


def test_t_pin_memory_makes_a_buffer_an_upload_reads_without_a_staging_copy(gpu: SimulatedGPU) -> None:
    pinned, pageable = torch.ones(4).pin_memory(), torch.ones(4)
    assert pinned.is_pinned() and not pageable.is_pinned()
    made = []
    assert transfers_made_by(gpu, lambda: made.append(pinned.to("simgpu", non_blocking=True))) == []
    assert made[0].tolist() == [1.0] * 4


# ----------------------------------------------------------------------------- step 3: streams and events


def test_a_side_streams_work_runs_only_when_the_host_waits_on_it(gpu: SimulatedGPU) -> None:
    """A read on the default stream waits for the default stream alone (PyTorch's side streams do not block with
    it): the side stream's copy lands at the wait on its event."""
    x = torch.arange(1, 5, device="simgpu")
    buffer = gpu.pinned((4,), torch.int64)
    side = gpu.Stream()
    side.wait_stream(gpu.current_stream())
    with gpu.stream(side):
        assert gpu.current_stream() == side
        buffer.copy_(x * 10, non_blocking=True)
        copied = side.record_event()
    assert gpu.current_stream() == gpu.default_stream()
    assert [t.kind for t in transfers_made_by(gpu, lambda: x.sum().item())] == [SyncKind.ITEM.value]
    assert buffer.tolist() == [0, 0, 0, 0]  # the default stream ran; the side stream's copy has not
    assert [t.kind for t in transfers_made_by(gpu, copied.synchronize)] == [SyncKind.EVENT_SYNC.value]
    assert buffer.tolist() == [10, 20, 30, 40]


@pytest.mark.parametrize("ordered", [True, False], ids=["after wait_stream", "without a wait"])
def test_a_stream_that_copies_data_no_wait_ordered_it_after_gets_what_the_memory_held(gpu: SimulatedGPU,
                                                                                      ordered: bool) -> None:
    y = torch.arange(4, device="simgpu") + 1  # queued on the default stream, not run
    side = gpu.Stream()
    if ordered:
        side.wait_stream(gpu.current_stream())
    with gpu.stream(side):
        out = y.to("cpu", non_blocking=True)
    races = len(gpu.ledger().races)
    assert [t.kind for t in transfers_made_by(gpu, side.synchronize)] == [SyncKind.STREAM_SYNC.value]
    new_races = gpu.ledger().races[races:]
    if ordered:
        assert out.tolist() == [1, 2, 3, 4] and new_races == []
    else:
        assert out.tolist() == [IN_FLIGHT] * 4
        assert new_races == [f"side stream {side.sid} used a tensor that default had not made yet: no wait_stream "
                             f"or wait_event ordered side stream {side.sid} after it"]


def test_an_op_on_data_no_wait_ordered_it_after_computes_on_what_the_memory_held_and_the_device_goes_on(
        gpu: SimulatedGPU) -> None:
    """A race is not a device error: as on a GPU, the op reads whatever the memory held (the in-flight value here),
    the race is recorded, and the device serves the next read."""
    from synclab.syncs import in_flight_value
    y = torch.arange(4, device="simgpu") + 1  # queued on the default stream, not run
    side = gpu.Stream()
    with gpu.stream(side):
        doubled = y * 2  # no wait_stream: side may run before default has made y
    races = len(gpu.ledger().races)
    side.synchronize()
    with gpu.stream(side):
        got = doubled.tolist()
    assert got == [in_flight_value(torch.int64) * 2] * 4
    assert len(gpu.ledger().races) == races + 1 and y.tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("recorded", [True, False], ids=["record_stream", "no record_stream"])
def test_memory_freed_on_its_stream_waits_for_the_streams_record_stream_names(gpu: SimulatedGPU,
                                                                             recorded: bool) -> None:
    """The caching allocator's rule: a tensor dropped by the host is freed on the stream that made it, and a side
    stream still to use it must be named with record_stream."""
    x = torch.arange(1, 4, device="simgpu")
    side = gpu.Stream()
    side.wait_stream(gpu.current_stream())
    with gpu.stream(side):
        out = x.to("cpu", non_blocking=True)
        if recorded:
            x.record_stream(side)
    del x
    gc.collect()
    races = len(gpu.ledger().races)
    torch.zeros(1, device="simgpu").sum().item()  # the default stream runs, and reaches the free
    side.synchronize()
    new_races = gpu.ledger().races[races:]
    if recorded:
        assert out.tolist() == [1, 2, 3] and new_races == []
    else:
        assert out.tolist() == [IN_FLIGHT] * 3 and len(new_races) == 1 and "freed on default" in new_races[0]


def test_a_query_waits_for_nothing_but_a_second_look_is_a_poll_and_counted(gpu: SimulatedGPU) -> None:
    side = gpu.Stream()
    with gpu.stream(side):
        torch.ones(3, device="simgpu") * 2
        done = side.record_event()
    answers = []
    assert transfers_made_by(gpu, lambda: answers.append(done.query())) == []  # one look: no wait
    polled = transfers_made_by(gpu, lambda: answers.extend([done.query(), side.query()]))
    assert answers == [False, True, True]
    assert [t.kind for t in polled] == [SyncKind.EVENT_SYNC.value]  # the host spun until the work was done
    assert gpu.Event().query()  # never recorded: nothing to wait for, as on CUDA


def test_the_device_process_logs_the_streams_in_chapter_2s_words(gpu: SimulatedGPU) -> None:
    before = gpu.ledger()
    side = gpu.Stream()
    sleeping, spinning = gpu.Event(blocking=True), gpu.Event()
    x = torch.ones(4, device="simgpu")
    with gpu.stream(side):
        side.wait_stream(gpu.default_stream())
        x.to("cpu", non_blocking=True)
        x.record_stream(side)
    for event in (sleeping, spinning):
        event.record(side)
        event.synchronize()
    gpu.current_stream().wait_event(gpu.Event())
    gpu.synchronize()
    after = gpu.ledger()
    assert after.streams_made == before.streams_made + 1
    name = f"side stream {side.sid}"
    assert after.log[len(before.log):] == [
        ("create stream", name, ""),
        ("wait_stream", name, "waits for default"),
        ("copy to host", name, "[4] non_blocking"),
        ("record_stream", name, "[4] kept until this stream's work is done"),
        ("record event", name, "after 1 queued copies"),
        ("host waits", name, "Event.synchronize (blocking)"),
        ("record event", name, "after 0 queued copies"),
        ("host waits", name, "Event.synchronize"),
        ("wait_event", "default", "an event never recorded: no wait"),
        ("host waits", "all streams", "torch.cuda.synchronize")]


def test_a_check_reads_the_device_processs_streams_as_it_reads_the_in_process_ones(gpu: SimulatedGPU) -> None:
    """simulated_cuda() inside running_on yields what the watcher reads: the same names, the device process's data."""
    from synclab.sim.cuda import simulated_cuda
    with running_on(gpu), simulated_cuda() as device:
        created, logged = device.streams_created, len(device.log.entries)
        side = torch.cuda.Stream()
        x = torch.ones(4, device="simgpu")
        with torch.cuda.stream(side):
            side.wait_stream(torch.cuda.default_stream())
            x.to("cpu", non_blocking=True)
            x.record_stream(side)
        queued = device.copies_queued()
        held = device.held_by([x])
        side.synchronize()
        assert device.streams_created == created + 1 and len(queued) == 1 and not device.copies_queued()
        assert held == [f"side stream {side.sid}"] and device.held_by([x]) == []
        assert [(e.waiter, e.waits_for) for e in device.edges][-1:] == [(f"side stream {side.sid}", "default")]
        assert device.log.ops()[logged:] == ["create stream", "wait_stream", "copy to host", "record_stream",
                                             "host waits"]


# count_syncs counts, row by row, and refuse what it refuses.


@pytest.mark.parametrize("row", TABLE, ids=[row[0] for row in TABLE])
def test_the_device_process_counts_the_sync_table_as_the_in_process_device(gpu: SimulatedGPU, row) -> None:
    name, op, expected, kinds = row
    with running_on(gpu):
        env = make_env()
        moved = transfers_made_by(gpu, lambda: op(env))
    waits = [t for t in moved if SyncKind(t.kind).waits_for_device]
    agrees = (len(waits), {SyncKind(t.kind) for t in moved}) == (expected, kinds)
    assert agrees, f"{name}: the device process moved {moved}; count_syncs counts {expected} of {kinds}"


@pytest.mark.parametrize("row", ROUTES, ids=[row[0] for row in ROUTES])
def test_the_device_process_takes_every_route_to_a_device_tensors_bytes_as_cuda_does(gpu: SimulatedGPU, row) -> None:
    name, op, cuda, kinds = row
    with running_on(gpu):
        env = make_env()
        before = len(gpu.ledger().transfers)
        raised = None
        try:
            op(env)
        except Exception as exc:  # noqa: BLE001 - compared with what CUDA raises below
            raised = exc
        moved = gpu.ledger().transfers[before:]
    expected = 0 if isinstance(cuda, type) else cuda
    agrees = (len(moved), {SyncKind(t.kind) for t in moved}) == (expected, kinds) and \
        (isinstance(raised, cuda) if isinstance(cuda, type) else raised is None)
    assert agrees, f"{name}: the device process moved {moved} and raised {raised!r}; CUDA: {cuda} of {kinds}"


@pytest.mark.parametrize("row", REFUSED, ids=[row[0] for row in REFUSED])
def test_the_device_process_refuses_what_cuda_refuses(gpu: SimulatedGPU, row) -> None:
    name, op, words = row
    with running_on(gpu):
        env = make_env()
        try:
            op(env)
            raised = None
        except RuntimeError as exc:
            raised = exc
    agrees = raised is not None and re.search(words, str(raised)) is not None
    assert agrees, f"{name}: the device process raised {raised!r}; CUDA raises with {words!r}"


@pytest.mark.parametrize("fixed", [False, True], ids=["baseline", "all fixes"])
def test_the_capstones_engine_on_the_device_process_gives_the_same_tokens_and_syncs_step_by_step(
        gpu: SimulatedGPU, fixed: bool) -> None:
    """The whole engine (chapter 6) on the device process, unchanged: the outputs of the in-process device, and in
    each step the syncs count_syncs counts there, kind by kind."""
    import random
    from collections import Counter
    from contextlib import contextmanager

    from synclab import capstone as ch6
    from synclab.engine.engine_core import EngineConfig
    from synclab.syncs import count_syncs

    mix, config, fixes = ch6.random_mix(random.Random(0)), EngineConfig() if fixed else EngineConfig.baseline(), \
        ch6.book_fixes()
    in_process: list[Counter] = []
    on_the_device_process: list[Counter] = []

    @contextmanager
    def counted(engine):
        with count_syncs() as report:
            yield
        in_process.append(Counter(e.kind.value for e in report.events + report.staged))

    @contextmanager
    def from_the_ledger(engine):
        before = len(gpu.ledger().transfers)
        yield
        on_the_device_process.append(Counter(t.kind for t in gpu.ledger().transfers[before:]))

    expected = ch6.comparable(ch6.run_engine(mix, config, fixes, each_step=lambda engine: counted(engine)))
    with running_on(gpu):
        got = ch6.comparable(ch6.run_engine(mix, config, fixes, each_step=lambda engine: from_the_ledger(engine)))
    assert ch6.first_difference(got, expected) is None
    assert on_the_device_process == in_process and sum(sum(step.values()) for step in in_process) > 0


def test_outputs_read_back_together_cost_one_round_trip_and_count_a_copy_each(gpu: SimulatedGPU) -> None:
    """Step 8: a check reading many outputs back (read_back_together, under tensors_as_data) sends one message for
    all of them, and the ledger counts each as the blocking copy t.to("cpu") is; a host tensor is left to the caller."""
    from synclab.device import read_back_together
    from synclab.syncs import count_syncs

    with running_on(gpu):
        outputs = [torch.arange(n + 1, device="simgpu") for n in range(5)]
        host = torch.ones(2)
        with count_syncs() as report:
            sent = gpu._sent
            back = read_back_together([*outputs, host])
            messages = gpu._sent - sent
    assert messages == 1
    assert [back[id(t)].tolist() for t in outputs] == [list(range(n + 1)) for n in range(5)] and id(host) not in back
    assert [e.kind for e in report.events] == [SyncKind.D2H_COPY] * 5


def test_count_syncs_on_the_device_process_reports_what_its_ledger_counted(gpu: SimulatedGPU) -> None:
    """Step 5 begun: inside running_on(gpu), count_syncs reads the device process's ledger, allowed regions and
    staging copies kept apart as on the in-process device."""
    from synclab.syncs import count_syncs, gpu_sync_allowed

    with running_on(gpu):
        x = torch.arange(4.0, device="simgpu")
        with count_syncs() as report:
            x.sum().item()
            with gpu_sync_allowed():
                x.tolist()
            torch.ones(2).to("simgpu", non_blocking=True)
    assert [(e.kind, e.allowed) for e in report.events] == [(SyncKind.ITEM, False), (SyncKind.TOLIST, True)]
    assert [e.kind for e in report.staged] == [SyncKind.STAGED_COPY] and report.stray_count == 1
    assert report.events[0].filename == __file__ and "x.sum().item()" in report.events[0].code


def test_a_stream_no_one_waits_for_keeps_no_pinned_buffer_it_never_copied_with(gpu: SimulatedGPU) -> None:
    """A dropped pinned buffer waits for the streams that copied into or from it, not for every busy stream: a side
    stream whose work the host never waits for (an answer that crashed mid-step) kept every later buffer, and a long
    session ran the device process out of files ("received 0 items of ancdata", when each buffer was a file)."""
    with running_on(gpu):
        x = torch.arange(4, device="simgpu")
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            queued_forever = x + 1  # noqa: F841 - work on a stream no one waits for
        x.sum().item()
        before = len(gpu._blocks)  # the blocks of pinned memory the device has not released
        for _ in range(60):
            host = x.to("cpu", non_blocking=True)  # a pinned buffer, its download on the default stream
            del host
        x.sum().item()  # the default stream runs: the downloads land, the dropped buffers can go
        x.sum().item()  # and the host says they went with its next message; the device's answer says they are free
        assert len(gpu._blocks) - before < 5


def test_pinned_buffers_are_blocks_of_memory_mapped_once_and_reused_once_released(gpu: SimulatedGPU) -> None:
    """A pinned buffer costs no file of its own (a segment crosses once); a block the device released is reused, one
    it may still write is not."""
    with running_on(gpu):
        x = torch.arange(4, device="simgpu")
        x.sum().item()
        segments = len(gpu._host_pool.segments)
        addresses = set()
        for _ in range(200):
            host = x.to("cpu", non_blocking=True)
            x.sum().item()  # landed; the buffer dropped next time round is released at the next answer
            addresses.add(host.data_ptr())
            assert host.tolist() == [0, 1, 2, 3]
            del host
        assert len(gpu._host_pool.segments) == segments and len(addresses) <= 3
        in_flight = x.to("cpu", non_blocking=True)  # its download not run: its block is not free
        address = in_flight.data_ptr()
        del in_flight
        again = torch.arange(4).pin_memory()
        assert again.data_ptr() != address and x.sum().item() == 6


def test_a_pinned_buffer_the_host_drops_is_freed_in_both_processes(gpu: SimulatedGPU) -> None:
    """Every non_blocking download makes a pinned buffer (shared memory, a file descriptor in each process): the
    buffers a check's thousands of steps drop must not pile up."""
    x = torch.arange(4, device="simgpu")
    for _ in range(3):
        x.to("cpu", non_blocking=True)  # dropped at once
    kept = x.to("cpu", non_blocking=True)
    gpu.synchronize()
    gpu.pinned((1,))  # a new buffer frees the dropped ones first
    assert len(gpu._pinned) == 2 and kept.tolist() == [0, 1, 2, 3]


# Every honest answer of these exercises gets the same verdict, check by check, on the device process as on the
# in-process device (seed 0). The others are left out for the suite's time (CONTRIBUTING, step 6: measured by hand,
# all agree but wrong/3.2-marks-column-0-after-the-upload, which the device process judges more faithfully).
SAME_VERDICTS = ("0.1", "0.2", "2.1", "2.2", "3.1", "4.1", "4.2", "5.2")
# Answers judged apart, each with why: the test fails once one agrees (then take it out)
NOT_YET = {
    "wrong/0.1-non-blocking-read-back": "its early read gets the in-flight values on the device process, as on a GPU, "
                                        "and the step raises; in process the copy is done when it returns outside "
                                        "count_syncs, so only the sync check fails",
    "wrong/2.1-no-wait-for-the-forward": "its side stream copies before the forward has written the outputs: on the "
                                         "device process, as on a GPU, the copies hold what the memory held and three "
                                         "more checks fail; in process the copy reads the finished values",
}


def _answers_of(tasks: tuple[str, ...]) -> list:
    from tests.honest.corpus import answers
    return [a for kind in ("right", "wrong") for a in answers(kind) if a.task in tasks]


def test_every_answer_of_the_ported_exercises_gets_the_same_verdict_on_both_devices(gpu: SimulatedGPU) -> None:
    from tests.honest.corpus import judged_in_a_namespace

    def verdict(report) -> dict[str, str]:
        return {o.name: o.status for o in report.outcomes}

    differ = {}
    for answer in _answers_of(SAME_VERDICTS):
        in_process = verdict(judged_in_a_namespace(answer))
        with running_on(gpu):
            on_the_device_process = verdict(judged_in_a_namespace(answer))
        if in_process != on_the_device_process:
            differ[answer.name] = {k: (in_process.get(k), on_the_device_process.get(k))
                                   for k in in_process.keys() | on_the_device_process.keys()
                                   if in_process.get(k) != on_the_device_process.get(k)}
    assert set(differ) == set(NOT_YET), differ


def test_a_read_of_a_download_before_it_lands_is_named_and_one_after_is_not(gpu: SimulatedGPU) -> None:
    """The device says, with each answer, which pinned buffers downloads landed in; count_syncs names a host read of
    one still in flight (a race, not a sync), as the in-process counter does."""
    from synclab.syncs import RaceKind, count_syncs

    with running_on(gpu):
        x = torch.arange(3, device="simgpu")
        with count_syncs() as report:
            host = x.to("cpu", non_blocking=True)
            early = host.tolist()  # the line the race is named at
            x.sum().item()  # a wait on the stream the copy is queued on: it lands
            late = host.tolist()
    assert early == [IN_FLIGHT] * 3 and late == [0, 1, 2]
    assert [(e.kind, e.code) for e in report.early_reads] == [(RaceKind.EARLY_READ, "early = host.tolist()  # the line the race is named at")]
    assert [e.kind for e in report.events] == [SyncKind.ITEM]


def test_a_view_of_a_download_before_it_lands_reads_nothing_and_a_read_of_the_view_is_named(gpu: SimulatedGPU) -> None:
    """The capstone's engine keeps a reshaped view of its sampled tokens' buffer while the copy is in flight: no read
    (the engine reads it after the event); reading the view before the copy lands is the early read."""
    from synclab.syncs import count_syncs

    with running_on(gpu):
        x = torch.arange(6, device="simgpu")
        with count_syncs() as report:
            host = x.to("cpu", non_blocking=True)
            column, first = host.reshape(-1, 1), host[:2]  # views: nothing read
            early = column.sum()  # the read of a view
            x.sum().item()
    assert int(early) == 6 * IN_FLIGHT
    assert [e.code for e in report.early_reads] == ["early = column.sum()  # the read of a view"], report.early_reads
    assert first.tolist() == [0, 1]
