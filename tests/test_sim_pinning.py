"""The pinned-memory simulation of chapter 3: a GPU machine, and the WSL case."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from synclab.device import SIM_DEVICE, has_cuda, is_pin_memory_available, is_pinned_host, pick_device, to_device
from synclab.sim.pinning import PinnedMemoryUnavailable, simulated_pinning
from synclab.syncs import SyncKind, count_syncs

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def test_available_pinning_gives_pinned_host_tensors():
    with simulated_pinning(True):
        assert is_pin_memory_available()
        made = torch.zeros(3, pin_memory=True)
        copied = torch.arange(4).pin_memory()
        assert is_pinned_host(made) and made.is_pinned()
        assert is_pinned_host(copied) and copied.tolist() == [0, 1, 2, 3]
        assert not torch.zeros(3).is_pinned()


def test_pin_memory_copies_the_source():
    with simulated_pinning(True):
        source = torch.arange(4)
        pinned = source.pin_memory()
        source[0] = 99
        assert pinned[0] == 0


def test_pin_memory_returns_a_pinned_tensor_as_it_is():
    """As torch does: only pageable memory is copied, so reusing a pinned buffer through pin_memory() is the same
    buffer, and the hazard of refilling it before its upload ran shows."""
    with simulated_pinning(True):
        pinned = torch.zeros(4, pin_memory=True)
        assert pinned.pin_memory() is pinned


def test_a_view_of_pinned_memory_with_gaps_uploads_as_pageable_memory_does():
    """As CUDA's copy does (copy_kernel_cuda's temporaries): a host source with gaps goes up through a contiguous
    temporary torch makes in pageable memory, so it stages; whole rows of the same pinned buffer do not, nor does a
    transposed tensor (no gaps: one copy). pin_memory() keeps a view's gaps, so pinning a slice of columns as it is
    stages too (tests/test_copy_layouts.py holds the whole rule)."""
    dev = pick_device()
    with simulated_pinning(True):
        buffer = torch.zeros(4, 8, pin_memory=True)
        transposed = torch.arange(12.0).reshape(3, 4).t().pin_memory()
        columns = torch.arange(32.0).reshape(4, 8)[:, :5].pin_memory()
        assert is_pinned_host(buffer[:, :5]) and not buffer[:, :5].is_contiguous() and not transposed.is_contiguous()
        assert is_pinned_host(columns) and columns.stride() == (8, 1)
        with count_syncs() as report:
            buffer[:2].to(dev, non_blocking=True)  # whole rows: contiguous
            buffer[:, :5].to(dev, non_blocking=True)  # gaps: staged
            transposed.to(dev, non_blocking=True)  # no gaps: one copy
            columns.to(dev, non_blocking=True)  # pinned with its gaps: staged
            columns.contiguous().pin_memory().to(dev, non_blocking=True)  # the remedy
        assert report.count == 0 and [e.kind for e in report.staged] == [SyncKind.STAGED_COPY] * 2


def test_wsl_refuses_pinning_and_says_why():
    with simulated_pinning(False):
        assert not is_pin_memory_available()
        with pytest.raises(PinnedMemoryUnavailable, match="WSL"):
            torch.zeros(3, pin_memory=True)
        with pytest.raises(PinnedMemoryUnavailable, match="is_pin_memory_available"):
            torch.arange(3).pin_memory()
        torch.zeros(3, pin_memory=False)  # passing the flag is fine


def test_pageable_non_blocking_uploads_are_staging_copies_not_syncs():
    dev = pick_device()
    with simulated_pinning(True), count_syncs() as report:
        torch.arange(8).to(dev, non_blocking=True)
        torch.arange(8, pin_memory=True).to(dev, non_blocking=True)
        torch.zeros(8, pin_memory=False).to(dev, non_blocking=True)  # a hard-coded False is still pageable
    assert report.count == 0
    assert [e.kind for e in report.staged] == [SyncKind.STAGED_COPY] * 2
    with simulated_pinning(False), count_syncs() as report:
        torch.arange(8).to(dev, non_blocking=True)  # the best WSL can do: staged all the same
        torch.arange(8).to(dev)  # a blocking copy waits for the device
    assert [e.kind for e in report.events] == [SyncKind.H2D_COPY]
    assert [e.kind for e in report.staged] == [SyncKind.STAGED_COPY]


def test_a_non_blocking_download_into_pageable_memory_is_a_device_wait():
    dev = pick_device()
    x = to_device(torch.arange(8.0), dev)
    with simulated_pinning(True), count_syncs() as report:
        torch.empty(8).copy_(x, non_blocking=True)  # pageable destination: returns when the copy is done
        torch.empty(8, pin_memory=True).copy_(x, non_blocking=True)  # pinned: asynchronous
        x.to("cpu", non_blocking=True)  # torch allocates a pinned destination itself
    assert [e.kind for e in report.events] == [SyncKind.PAGEABLE_D2H]
    assert report.events[0].nbytes == 8 * 4 and not report.staged


def test_the_answer_is_restored_after_the_block():
    before = is_pin_memory_available()
    with simulated_pinning(not before):
        pass
    assert is_pin_memory_available() == before


def test_simulated_device_is_the_cpu_stand_in():
    assert pick_device() == SIM_DEVICE


def test_a_non_blocking_read_nothing_waited_for_is_listed_until_a_wait_covers_it():
    """Chapter 3's watch for a read-back used too early (3.7); the simulated streams' waits work without CUDA."""
    from synclab.sim.cuda import simulated_cuda
    from synclab.pinned_transfers.checks.common import unwaited, watch_async_reads

    x = to_device(torch.arange(8.0), SIM_DEVICE)
    with simulated_pinning(True), simulated_cuda(async_copies=False), count_syncs(simulate=True) as report, \
            watch_async_reads(report) as reads:
        early = x.to("cpu", non_blocking=True)  # torch's own pinned destination: returns before the data
        torch.empty(8, pin_memory=True).copy_(x, non_blocking=True)
        assert [w.split(" ", 1)[1] for w in unwaited(reads, report)] == [
            '`early = x.to("cpu", non_blocking=True)  # torch\'s own pinned destination: returns before the data`',
            "`torch.empty(8, pin_memory=True).copy_(x, non_blocking=True)`"]
        torch.cuda.current_stream().synchronize()  # simulated: counted as a wait, no CUDA needed
        assert unwaited(reads, report) == []
        torch.empty(8).copy_(x, non_blocking=True)  # into pageable memory it waits itself: nothing to list
    assert early.tolist() == list(range(8))  # async_copies=False: the copy landed at once
    assert [e.kind for e in report.events] == [SyncKind.STREAM_SYNC, SyncKind.PAGEABLE_D2H]
    assert len(reads) == 2


def test_torch_s_warnings_under_simulated_pinning_name_the_caller_s_line() -> None:
    """``torch.tensor(a_tensor)`` warns that cloning is better: under the simulation, as on a GPU, the warning names
    the line that called torch, not the simulation's."""
    import warnings

    from synclab.sim import pinning

    pinning._WARNED.clear()
    with simulated_pinning(True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.tensor(torch.arange(4), dtype=torch.float32)
    assert caught and {w.filename for w in caught} == {__file__}, [(w.filename, w.lineno) for w in caught]


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor")  # torch says it before it refuses
@pytest.mark.parametrize("data, said", [(torch.arange(4), "Can't pin tensor constructed from a variable"),
                                        (np.arange(4), "Can't pin tensor constructed from numpy")],
                         ids=["a tensor", "an array"])
def test_torch_tensor_refuses_to_pin_a_tensor_or_an_array_as_torch_does(data, said: str) -> None:
    """torch refuses these before it asks any allocator, so on every machine (checked against torch itself here,
    where it has no allocator to ask); a list it pins."""
    with pytest.raises(RuntimeError, match=said):
        torch.tensor(data, pin_memory=True)  # torch's own words, outside the simulation
    with simulated_pinning(True):
        with pytest.raises(RuntimeError, match=said):
            torch.tensor(data, pin_memory=True)
        assert torch.tensor([1, 2], pin_memory=True).is_pinned()
