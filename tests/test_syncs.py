"""count_syncs: a table of operations with the number of host-device syncs each performs.

On a CPU-only machine the counts are the simulated ones (tensors marked by to_device,
streams and events from synclab.sim.cuda). On a GPU the same table runs twice
more: against CUDA's own sync debug mode, and against the device itself (did the host
return before the work queued ahead of it was done?).

Each row's count follows PyTorch's C++ (torch 2.13's headers ship with the wheel):
``c10::cuda::memcpy_and_sync`` and ``stream_synchronize`` warn under the debug mode
(c10/cuda/CUDAFunctions.h), ``CUDAEvent::synchronize`` and ``device_synchronize`` do not;
``torch.equal`` answers aliased tensors from metadata (ATen/native/cuda/Equal.cpp);
``repeat_interleave`` without ``output_size`` reads back twice (ATen/native/Repeat.h).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable

import pickle

import numpy as np
import pytest
import torch

from synclab.device import has_cuda, is_device_tensor, is_pin_memory_available, pick_device, to_device
from synclab.sim import cuda as sim_cuda
from synclab.syncs import RaceKind, SyncKind, count_syncs, syncs_per_call
from tests.devices import EACH_DEVICE
from tests.snapshots import matches_report_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


@dataclass
class Env:
    x: torch.Tensor  # [16] float device
    idx: torch.Tensor  # [2] int64 device: [2, 9]
    host: torch.Tensor  # [2] int64 host metadata: [4, 12]
    dev: object  # the device (real or simulated)


def make_env() -> Env:
    dev = pick_device()
    return Env(to_device(torch.arange(16.0)), to_device(torch.tensor([2, 9])), torch.tensor([4, 12]), dev)


def _pinned_upload(e: Env) -> torch.Tensor:
    buf = torch.empty(2, dtype=torch.int64, pin_memory=is_pin_memory_available())
    buf.copy_(e.host)
    return buf.to(e.dev, non_blocking=True)


def _pinned_download(e: Env) -> torch.Tensor:
    buf = torch.empty(16, pin_memory=is_pin_memory_available())
    return buf.copy_(e.x, non_blocking=True)


def _event_synchronize(e: Env) -> None:
    event = torch.cuda.Event()
    event.record()
    event.synchronize()


def _if_any(e: Env) -> None:
    if (e.x > 3).any():
        pass


# (name, operation, expected syncs, expected kinds)
TABLE: list[tuple[str, Callable[[Env], object], int, set[SyncKind]]] = [
    ("item", lambda e: e.x[3].item(), 1, {SyncKind.ITEM}),
    ("int() of a device scalar", lambda e: int(e.idx[0]), 1, {SyncKind.ITEM}),
    ("tolist on device", lambda e: e.idx.tolist(), 1, {SyncKind.TOLIST}),
    ("tolist on host metadata", lambda e: e.host.tolist(), 0, set()),
    ("item on host metadata", lambda e: e.host.sum().item(), 0, set()),
    ("bool()", lambda e: bool(e.x.sum() > 0), 1, {SyncKind.BOOL}),
    ("if tensor.any()", _if_any, 1, {SyncKind.BOOL}),
    ("slice with device tensor bounds", lambda e: e.x[e.idx[0]:e.idx[1]], 2, {SyncKind.TENSOR_SLICE}),
    ("slice with Python ints", lambda e: e.x[2:9], 0, set()),
    ("slice with host tensor bounds", lambda e: e.x[e.host[0]:e.host[1]], 0, set()),
    ("split with a Python list", lambda e: e.x.split([4, 12]), 0, set()),
    ("split with host sizes .tolist()", lambda e: e.x.split(e.host.tolist()), 0, set()),
    ("nonzero", lambda e: torch.nonzero(e.x > 3), 1, {SyncKind.NONZERO}),
    ("torch.where(cond)", lambda e: torch.where(e.x > 3), 1, {SyncKind.NONZERO}),
    ("masked_select", lambda e: e.x.masked_select(e.x > 3), 1, {SyncKind.NONZERO}),
    ("unique", lambda e: torch.unique(e.x), 1, {SyncKind.NONZERO}),
    ("boolean-mask read", lambda e: e.x[e.x > 3], 1, {SyncKind.BOOL_MASK_INDEX}),
    ("boolean-mask write of a Python scalar (masked_fill)", lambda e: e.x.__setitem__(e.x > 3, 0.0), 0, set()),
    # values that alias the written tensor (e.x[:1]) CUDA refuses: see REFUSED
    ("boolean-mask write of device values", lambda e: e.x.__setitem__(e.x > 3, e.x[:1].clone()), 1,
     {SyncKind.BOOL_MASK_INDEX}),
    ("integer-index gather", lambda e: e.x[e.idx], 0, set()),
    # the index is built in host memory and copied to the device, blocking (from pageable memory)
    ("integer-index gather with a Python list", lambda e: e.x[[2, 9]], 1, {SyncKind.H2D_COPY}),
    ("integer-index gather with a host index tensor", lambda e: e.x[e.host], 1, {SyncKind.H2D_COPY}),
    ("integer-index write of a Python scalar at a Python list (the scalar, then the index)",
     lambda e: e.x.__setitem__([2, 9], 0.0), 2, {SyncKind.H2D_COPY}),
    ("index_fill_", lambda e: e.x.index_fill_(0, e.idx, 0.0), 0, set()),
    ("integer-index write of a Python scalar (copies the scalar over)", lambda e: e.x.__setitem__(e.idx, 0.0), 1,
     {SyncKind.H2D_COPY}),
    # x[3] = 5: the scalar becomes a 0-d host tensor copied over, blocking; x[3:4] = 5 is a fill_ (ATen's copy_to)
    ("element write of a Python scalar", lambda e: e.x.__setitem__(3, 5.0), 1, {SyncKind.H2D_COPY}),
    ("one-element slice write of a Python scalar", lambda e: e.x.__setitem__(slice(3, 4), 5.0), 0, set()),
    ("element write of a device value into host memory", lambda e: e.host.__setitem__(0, e.idx[0]), 1,
     {SyncKind.D2H_COPY}),
    ("integer-index write of device values", lambda e: e.x.__setitem__(e.idx, e.x[:2] * 2), 0, set()),
    ("slice assignment from a device tensor", lambda e: e.x.__setitem__(slice(2, 4), e.x[5:7]), 0, set()),
    ("argmax on the device", lambda e: e.x.argmax(dim=0), 0, set()),
    ("new device tensor from x.device", lambda e: torch.zeros(4, device=e.x.device), 0, set()),
    ("torch.equal of two tensors", lambda e: torch.equal(e.x, e.x * 1), 1, {SyncKind.ITEM}),
    ("torch.equal of a tensor with itself (answered from metadata)", lambda e: torch.equal(e.x, e.x), 0, set()),
    ("torch.equal of different shapes (answered from metadata)", lambda e: torch.equal(e.x, e.x[:4]), 0, set()),
    ("blocking device-to-host copy .cpu()", lambda e: e.x.cpu(), 1, {SyncKind.D2H_COPY}),
    ("device-to-host .to('cpu', non_blocking=True)", lambda e: e.x.to("cpu", non_blocking=True), 0, set()),
    ("torch.tensor(list, device=dev)", lambda e: torch.tensor([1, 2, 3], device=e.dev), 1, {SyncKind.H2D_COPY}),
    # red team, third round: two more ways to upload data, and reads inside a Python-level torch function
    ("torch.asarray(list, device=dev)", lambda e: torch.asarray([1, 2, 3], device=e.dev), 1, {SyncKind.H2D_COPY}),
    ("x.new_tensor(list) (on x's device)", lambda e: e.x.new_tensor([1.0, 2.0]), 1, {SyncKind.H2D_COPY}),
    ("tensordot with device dims (each row read back)",
     lambda e: torch.tensordot(e.x.reshape(4, 4), e.x.reshape(4, 4), dims=(e.idx - e.idx).reshape(2, 1)), 2,
     {SyncKind.TOLIST}),
    # red team, fourth round: a number of classes, and a number of nonzeros, read back to size the output
    ("one_hot without num_classes (max() read back)", lambda e: torch.nn.functional.one_hot(e.idx), 1, {SyncKind.ITEM}),
    ("one_hot with num_classes", lambda e: torch.nn.functional.one_hot(e.idx, 16), 0, set()),
    ("to_sparse of a dense device tensor", lambda e: e.x.to_sparse(), 1, {SyncKind.NONZERO}),
    ("tensordot with one device dim", lambda e: torch.tensordot(e.x.reshape(4, 4), e.x.reshape(4, 4),
                                                                dims=(e.idx[:1] - 1)), 1, {SyncKind.ITEM}),
    ("blocking host-to-device .to(dev)", lambda e: e.host.to(e.dev), 1, {SyncKind.H2D_COPY}),
    # staged: the host copies into a bounce buffer and returns; a staging copy, not a device wait
    ("non_blocking upload from pageable memory", lambda e: e.host.to(e.dev, non_blocking=True), 0,
     {SyncKind.STAGED_COPY}),
    ("non_blocking upload from a pinned buffer", _pinned_upload, 0, set()),
    ("non_blocking download into pageable memory", lambda e: torch.empty(16).copy_(e.x, non_blocking=True), 1,
     {SyncKind.PAGEABLE_D2H}),
    ("non_blocking download into a pinned buffer", _pinned_download, 0, set()),
    ("Stream.synchronize()", lambda e: torch.cuda.current_stream().synchronize(), 1, {SyncKind.STREAM_SYNC}),
    ("Event.synchronize()", _event_synchronize, 1, {SyncKind.EVENT_SYNC}),
    ("torch.cuda.synchronize()", lambda e: torch.cuda.synchronize(), 1, {SyncKind.DEVICE_SYNC}),
    ("print(tensor)", lambda e: f"{e.x}", 1, {SyncKind.PRINT}),
    # two reads: the output size, then the check that no repeat is negative
    ("repeat_interleave with device repeats", lambda e: e.x[:2].repeat_interleave(e.idx), 2, {SyncKind.NONZERO}),
    # two reads: min() (negative inputs are refused) and max() (the number of bins), whatever minlength says
    ("bincount on the device", lambda e: torch.bincount(e.idx, minlength=16), 2, {SyncKind.NONZERO}),
    ("bincount of an empty tensor", lambda e: torch.bincount(e.idx[:0], minlength=16), 0, set()),
    ("repeat_interleave with output_size", lambda e: e.x[:2].repeat_interleave(e.idx, output_size=11), 0, set()),
]


def _streams():
    """Real CUDA streams and events on a GPU; the simulated ones on a CPU."""
    return nullcontext() if has_cuda() else sim_cuda.simulated_cuda()


@EACH_DEVICE
@pytest.mark.parametrize("name,op,expected,kinds", TABLE, ids=[row[0] for row in TABLE])
def test_sync_table(name, op, expected, kinds, device):
    env = make_env()
    with _streams(), count_syncs() as report:
        op(env)
    assert report.count == expected, str(report)
    assert {e.kind for e in report.events + report.staged} == kinds


@pytest.mark.cuda
@pytest.mark.parametrize("name,op,expected,kinds", TABLE, ids=[row[0] for row in TABLE])
def test_sync_table_against_cuda_debug_mode(name, op, expected, kinds):
    env = make_env()
    op(env)  # warm-up: lazy CUDA initialisation must not count
    env = make_env()
    with count_syncs() as report:
        op(env)
    assert not report.simulated
    assert report.count == expected, str(report)
    if SyncKind.PRINT in kinds:  # formatting reads several values back: CUDA sees each read
        assert report.cuda_reported >= report.cuda_visible_count, str(report)
    else:
        assert report.cuda_reported == report.cuda_visible_count, str(report)


SLEEP_CYCLES = 200_000_000  # about 0.1 s of one busy kernel on a 2 GHz GPU: far longer than any row's host work


@pytest.mark.cuda
@pytest.mark.parametrize("name,op,expected,kinds", TABLE, ids=[row[0] for row in TABLE])
def test_sync_table_against_the_device(name, op, expected, kinds):
    """A row counts a sync exactly when the host returns only after the work queued before it is done.

    No clock: a long kernel is queued, an event recorded after it, then the row runs;
    ``event.query()`` says whether the host got past the row before the kernel ended.
    A staging copy from pageable memory must not wait (CUDA: it returns once staged).
    """
    op(make_env())  # warm-up: allocations, lazy initialisation
    waited = _host_waited(op, make_env())
    assert waited == (expected > 0), f"{name}: the host {'waited' if waited else 'did not wait'} for queued work"


def _host_waited(op: Callable[[Env], object], env: Env) -> bool:
    """Whether ``op`` returned only after a long kernel queued before it had ended (no clock involved)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES)
    queued = torch.cuda.Event()
    queued.record()
    op(env)
    waited = queued.query()
    torch.cuda.synchronize()
    return waited


# Every way to read a device tensor on the host, and what CUDA does with it: refuses it (an exception type), or
# waits for the device (the number of syncs the simulated device counts). A CPU tensor standing for device memory
# would let numpy read it silently; the simulated device refuses and counts as CUDA does.
ROUTES: list[tuple[str, Callable[[Env], object], type[BaseException] | int, set[SyncKind]]] = [
    ("np.asarray(t)", lambda e: np.asarray(e.x), TypeError, set()),
    ("np.array(t)", lambda e: np.array(e.x, copy=None), TypeError, set()),
    ("t.__array__()", lambda e: e.x.__array__(), TypeError, set()),
    ("t.numpy()", lambda e: e.x.numpy(), TypeError, set()),
    ("np.from_dlpack(t)", lambda e: np.from_dlpack(e.x), BufferError, set()),
    ("memoryview(t) (no buffer protocol, host or device)", lambda e: memoryview(e.x), TypeError, set()),
    # a storage read fetches one byte per read: 64 waits for 16 floats on CUDA (the debug mode agrees); the
    # simulated device counts them when the storage is taken (it cannot see the reads)
    ("t.untyped_storage().tolist()", lambda e: e.x.untyped_storage().tolist(), 64, {SyncKind.ITEM}),
    ("pickle.dumps(t) (the storage saved through a host copy)", lambda e: pickle.dumps(e.x), 1, {SyncKind.D2H_COPY}),
    ("bytes(t): one __index__ per element", lambda e: bytes(e.idx), 2, {SyncKind.ITEM}),
    ("str(t)", lambda e: str(e.x), 1, {SyncKind.PRINT}),
    ("repr(t)", lambda e: repr(e.x), 1, {SyncKind.PRINT}),
    ("format(t)", lambda e: format(e.x), 1, {SyncKind.PRINT}),
    ("iterating t (0-d device tensors, nothing read)", lambda e: list(iter(e.x)), 0, set()),
    ("__index__: a list indexed by t[0]", lambda e: list(range(16))[e.idx[0]], 1, {SyncKind.ITEM}),
    ("__bool__: bool(t[0])", lambda e: bool(e.idx[0]), 1, {SyncKind.BOOL}),
    ("__float__: float(t[0])", lambda e: float(e.x[0]), 1, {SyncKind.ITEM}),
    ("__int__ of a 2-element tensor (refused on the host, nothing read)", lambda e: _raises(int, e.idx), 0, set()),
    ("comparison with a Python number (a device tensor)", lambda e: e.x > 3, 0, set()),
    ("if t[0] > 3: (the comparison's __bool__)", lambda e: bool(e.x[0] > 3), 1, {SyncKind.BOOL}),
    ("3 in t", lambda e: 3 in e.x, 1, {SyncKind.BOOL}),
    ("max(t) (Python's max: one __bool__ per comparison)", lambda e: max(e.idx), 1, {SyncKind.BOOL}),
]


# What CUDA refuses where a CPU would go on: the simulated device refuses it too, with CUDA's words.
REFUSED: list[tuple[str, Callable[[Env], object], str]] = [
    # a one-element host value becomes masked_fill_ on a CPU; a device value goes through index_put_, whose
    # overlap check raises (at::assert_no_overlap)
    ("boolean-mask write of values that alias the written tensor", lambda e: e.x.__setitem__(e.x > 3, e.x[:1]),
     "refer to a single memory location"),
    ("masked_fill_ with a host mask", lambda e: e.x.masked_fill_(torch.arange(16) > 3, 0.0), "same device"),
    # red team, second round: device data moved through out= with the tensors inside a list, counted by nothing
    ("cat of device tensors into a host view (out=)", lambda e: torch.cat([e.x], out=torch.empty(32)[:16]),
     "same device"),
    ("cat of a host tensor into a device tensor (out=)", lambda e: torch.cat([torch.ones(16)], out=e.x),
     "same device"),
    ("stack of device tensors into a host tensor (out=)", lambda e: torch.stack([e.x], out=torch.empty(1, 16)),
     "same device"),
    ("an in-place op with a host operand", lambda e: e.x.add_(torch.ones(16)), "same device"),
    # red team, fourth round: arguments CUDA reads on the host, refused on the device (the simulated device read them)
    ("pack_padded_sequence with lengths on the device", lambda e: torch.nn.utils.rnn.pack_padded_sequence(
        e.x.reshape(1, 16), e.idx[:1], batch_first=True), "1D CPU int64 tensor"),
    ("tensor_split at indices on the device", lambda e: torch.tensor_split(e.x, e.idx), "to be on cpu"),
    # red team, fifth round: host data taken into a device op, uploaded by nothing the counters saw
    ("a device tensor plus a host tensor", lambda e: e.x + torch.ones(16), "same device"),
    ("cat of a device and a host tensor", lambda e: torch.cat([e.x[:0], torch.ones(4)]), "same device"),
    ("where with a host operand", lambda e: torch.where(e.x > 3, e.x, torch.zeros(16)), "same device"),
]


@EACH_DEVICE
@pytest.mark.parametrize("name,op,words", REFUSED, ids=[row[0] for row in REFUSED])
def test_what_cuda_refuses_the_simulated_device_refuses(name, op, words, device):
    env = make_env()
    with _streams(), count_syncs(), pytest.raises(RuntimeError, match=words):
        op(env)


def test_the_refusals_are_the_simulated_devices_own(monkeypatch):
    """Without the simulated device's refusals, a CPU accepts both writes: the test above would fail."""
    import synclab.syncs

    monkeypatch.setattr(synclab.syncs, "_refuse_a_host_mask", lambda func, args: None)
    monkeypatch.setattr(synclab.syncs, "_refuse_an_aliased_mask_write", lambda func, args: None)
    monkeypatch.setattr(synclab.syncs, "_refuse_device_data_into_host", lambda func, args, kwargs: None)
    monkeypatch.setattr(synclab.syncs, "_refuse_a_device_argument_cuda_wants_on_the_host", lambda name, args: None)
    monkeypatch.setattr(synclab.syncs, "_refuse_mixed_devices", lambda name, args, kwargs: None)
    for name, op, words in REFUSED:
        with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
            test_what_cuda_refuses_the_simulated_device_refuses(name, op, words, "sim")


def _raises(fn: Callable[[Any], object], arg: Any) -> None:
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        fn(arg)


@EACH_DEVICE
@pytest.mark.parametrize("name,op,cuda,kinds", ROUTES, ids=[row[0] for row in ROUTES])
def test_every_route_to_a_device_tensors_bytes_behaves_as_on_cuda(name, op, cuda, kinds, device):
    env = make_env()
    with _streams(), count_syncs() as report:
        if isinstance(cuda, type):
            with pytest.raises(cuda) as raised:
                op(env)
            if "memoryview" not in name and cuda is TypeError:
                assert "can't convert cuda:0 device type tensor to numpy" in str(raised.value)
        else:
            op(env)
    expected = 0 if isinstance(cuda, type) else cuda
    assert report.count == expected, str(report)
    assert {e.kind for e in report.events} == kinds


def test_the_route_table_fails_on_a_route_that_slips_through(monkeypatch):
    """Without the simulated device's refusals, numpy reads the CPU tensor that stands for device memory: caught."""
    import synclab.syncs

    monkeypatch.setattr(synclab.syncs, "_REFUSED_ON_CUDA", {})
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        test_every_route_to_a_device_tensors_bytes_behaves_as_on_cuda(*ROUTES[0], "sim")
    monkeypatch.setattr(synclab.syncs, "_HIDDEN_READS", {})
    with pytest.raises(AssertionError):
        test_every_route_to_a_device_tensors_bytes_behaves_as_on_cuda(*ROUTES[7], "sim")  # pickle, no longer counted


@pytest.mark.cuda
@pytest.mark.parametrize("name,op,cuda,kinds", ROUTES, ids=[row[0] for row in ROUTES])
def test_every_route_on_cuda(name, op, cuda, kinds):
    env = make_env()
    if isinstance(cuda, type):
        with pytest.raises(cuda):
            op(env)
        return
    waited = _host_waited(op, env)
    assert waited == (cuda > 0), f"{name}: the host {'waited' if waited else 'did not wait'} for queued work"


def test_table_is_large_and_has_both_kinds():
    assert len(TABLE) >= 15
    assert sum(row[2] == 0 for row in TABLE) >= 8  # operations that must NOT be flagged
    assert {kind for row in TABLE for kind in row[3]} == set(SyncKind)  # every kind has a row


def test_reports_the_user_line_that_caused_the_sync():
    env = make_env()
    with count_syncs() as report:
        value = env.x[3].item()  # the line to find
    (event,) = report.events
    assert event.function == "test_reports_the_user_line_that_caused_the_sync"
    assert "the line to find" in event.code
    assert event.where.startswith("tests/test_syncs.py:") or event.where.startswith("test_syncs.py:")
    assert value == 3.0


def test_host_metadata_never_counts_and_marks_propagate():
    env = make_env()
    with count_syncs() as report:
        derived = (env.x * 2)[3:5]  # computed from device memory: device memory too
        assert is_device_tensor(derived)
        assert not is_device_tensor(env.host * 2)
        derived.tolist()
        (env.host * 2).tolist()
    assert report.count == 1


def test_copies_leave_their_source_where_it_was():
    env = make_env()
    with count_syncs():
        back = env.x.cpu()
        up = env.host.to(env.dev)
    assert is_device_tensor(env.x) and not is_device_tensor(back)
    assert not is_device_tensor(env.host) and is_device_tensor(up)


def test_bytes_read_back_are_counted():
    env = make_env()
    with count_syncs() as report:
        env.x.tolist()  # 16 float32
        env.idx[0].item()  # one int64
    assert report.bytes_to_host == 16 * 4 + 8


def test_syncs_per_call_is_an_average_over_calls():
    env = make_env()
    assert syncs_per_call(lambda: env.idx.tolist(), calls=4) == 1.0
    assert syncs_per_call(lambda: env.x[2:3], calls=3) == 0.0


def test_report_renders_as_text_and_html():
    env = make_env()
    with count_syncs() as report:
        env.idx.tolist()
    matches_report_snapshot(report)
    assert "tolist" in report._repr_html_() and "<table>" in report._repr_html_()
    assert report.by_kind() == {"tolist": 1}


def test_the_block_leaves_no_mode_behind():
    env = make_env()
    with count_syncs():
        pass
    with count_syncs() as outer:
        env.idx.tolist()
    assert outer.count == 1
    assert not isinstance(env.x.device, str)  # outside the block .device is a real torch.device


def test_an_exception_inside_the_block_still_returns_the_events():
    env = make_env()
    with pytest.raises(RuntimeError):
        with count_syncs() as report:
            env.idx.tolist()
            raise RuntimeError("boom")
    assert report.count == 1


# ----------------------------------------------------------------------------- allowed regions (vLLM's gpu_sync_allowed)


def test_a_sync_inside_gpu_sync_allowed_is_counted_but_not_stray():
    from synclab.syncs import gpu_sync_allowed

    x = to_device(torch.arange(4))
    with count_syncs() as report:
        x.sum().item()
        with gpu_sync_allowed():
            x.tolist()
            with gpu_sync_allowed():  # regions nest
                x[0].item()
        x.max().item()  # the region is closed again
    assert report.count == 4
    assert [e.allowed for e in report.events] == [False, True, True, False]
    assert report.stray_count == 2
    matches_report_snapshot(report)  # the allowed ones marked


def test_an_allowed_region_on_one_thread_allows_nothing_on_another():
    import threading

    from synclab.syncs import gpu_sync_allowed

    x = to_device(torch.arange(4))
    seen: list = []

    def other_thread() -> None:
        with count_syncs() as report:
            x.sum().item()
        seen.append(report)

    with gpu_sync_allowed():
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    (report,) = seen
    assert report.count == 1 and report.stray_count == 1  # the region belongs to the thread that opened it


def test_an_asyncio_task_inherits_the_region_it_was_created_in():
    import asyncio

    from synclab.syncs import gpu_sync_allowed

    x = to_device(torch.arange(4))

    async def read() -> None:
        x.sum().item()

    async def main():
        with count_syncs() as report:
            with gpu_sync_allowed():
                task = asyncio.create_task(read())  # created inside: the task copies the context
            await task
            x.tolist()  # outside again
        return report

    # A loop of its own, on a thread of its own: in one pytest process another plugin's loop may be running
    # on this thread, and asyncio.run refuses to start inside a running loop.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        report = pool.submit(asyncio.run, main()).result()
    assert [e.allowed for e in report.events] == [True, False]


@pytest.mark.cuda
def test_on_cuda_the_debug_mode_count_splits_allowed_from_stray_and_is_restored():
    from synclab.syncs import gpu_sync_allowed

    x = torch.arange(4.0, device="cuda")
    before = torch.cuda.get_sync_debug_mode()
    with count_syncs() as report:
        x.sum().item()
        with gpu_sync_allowed():
            x.max().item()
    assert report.cuda_reported == 2 and report.cuda_stray == 1, str(report)
    assert torch.cuda.get_sync_debug_mode() == before  # the process-wide switch is put back


def test_a_sync_in_a_comprehension_is_named_by_its_function_on_every_python():
    """Python 3.12 inlines comprehensions (PEP 709): the report names the enclosing function on 3.11 too."""
    env = make_env()

    def reads_each(e: Env) -> list[float]:
        return [e.x[i].item() for i in range(2)]

    with _streams(), count_syncs() as report:
        reads_each(env)
    assert [e.function for e in report.events] == ["reads_each", "reads_each"], str(report)


def test_a_non_blocking_download_read_before_a_wait_reads_what_the_buffer_held():
    """Red team, third round: int(x.to("cpu", non_blocking=True)) costs no sync, and on a GPU it reads the pinned
    buffer before the copy lands. The simulated device holds the download back until the host next waits for the
    device (here an .item(), which waits for everything queued before it), or the block ends."""
    env = make_env()
    with count_syncs() as report:
        early = env.idx.to("cpu", non_blocking=True)
        assert early.tolist() != [2, 9]  # the copy has not landed: a race on a GPU
        later = env.idx.to("cpu", non_blocking=True)
        env.x[0].item()  # a wait for the device: every copy queued before it is done
        assert later.tolist() == [2, 9]
        pinned = torch.empty(2, dtype=torch.int64, pin_memory=is_pin_memory_available())
        pinned.copy_(env.idx, non_blocking=True)
    assert report.count == 1, str(report)
    assert early.tolist() == pinned.tolist() == [2, 9]  # landed by the end of the block


def test_an_early_read_is_recorded_with_its_line():
    """A read of a download's buffer before it lands is a race, not a sync: the report records it apart
    (``early_reads``) with the line that read, so that a check can name it (chapter 6's stop hook read its tokens at
    once). Metadata is no read; a view of the buffer is; after a wait nothing is early."""
    env = make_env()
    with count_syncs() as report:
        early = env.idx.to("cpu", non_blocking=True)
        assert early.shape == (2,) and early.numel() == 2 and len(early) == 2  # metadata: not a read
        early[1:].tolist()  # the line that read too early
        env.x[0].item()  # a wait: the download has landed
        early.tolist()
    assert report.count == 1 and report.staged == [], str(report)
    assert report.early_reads, str(report)  # the slice and its .tolist(), both on that line
    assert all(e.kind is RaceKind.EARLY_READ and "the line that read too early" in e.code for e in report.early_reads)
    matches_report_snapshot(report)
    with count_syncs() as quiet:  # an upload's buffer and a host tensor are never in flight
        env.host.to(env.dev, non_blocking=True)
        (env.host + 1).tolist()
    assert quiet.early_reads == [] and "before it landed" not in str(quiet)


def test_one_value_marks_a_host_buffer_whose_copy_has_not_landed():
    """The counter's downloads and the simulated streams filled unread buffers differently (int64's max against
    -12345), so a hint that knew one missed the other: both now hold ``in_flight_value``, -12345 in every dtype that
    holds it."""
    import torch

    from synclab.sim import cuda as sim_cuda
    from synclab.syncs import IN_FLIGHT, in_flight_value

    assert [in_flight_value(d) for d in (torch.float32, torch.int64, torch.int32, torch.int16)] == [IN_FLIGHT] * 4
    assert in_flight_value(torch.bool) is True and in_flight_value(torch.uint8) == 255
    assert sim_cuda.GARBAGE == IN_FLIGHT
