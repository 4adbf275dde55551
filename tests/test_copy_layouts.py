"""Which ``non_blocking`` copies with pinned memory go through a pageable temporary (chapter 3; synclab/device.py).

One table of copies between pinned host memory and the device, each with what ATen's CUDA copy does with it: one
memcpy from (or into) the pinned bytes, or a contiguous temporary in pageable memory first, which makes the upload a
staging copy and the download a wait. The rule agrees with the table; ``count_syncs`` counts each copy so on the
simulated device and on a GPU; the device process counts it so; and on a GPU the profiler names the memcpy's host
side ("Pinned -> Device" or "Pageable -> Device"), the run that holds the table to CUDA itself.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest
import torch

from synclab.device import copies_as_they_lie, has_cuda, is_async_host_side, is_dense, pick_device, to_device
from synclab.sim.pinning import copy_keeping_layout, simulated_pinning
from synclab.syncs import SyncKind, count_syncs
from tests.devices import EACH_DEVICE

GRID = torch.arange(24.0).reshape(4, 6)  # [4, 6] float32

Pin = Callable[[torch.Tensor], torch.Tensor]  # a pinned copy of a host tensor
Up = Callable[[torch.Tensor], torch.Tensor]  # a device copy of a host tensor (a blocking upload, not counted)
Sides = Callable[[Pin, Up], tuple[torch.Tensor, torch.Tensor | None]]  # (the host side, the device side or None)


@dataclass(frozen=True)
class Copy:
    how: str  # "to": host.to(device); "up": device_side.copy_(host); "down": host.copy_(device_side)
    sides: Sides
    as_they_lie: bool  # what ATen's CUDA copy does: one memcpy of the pinned bytes (True), or a pageable temporary
    dtype: torch.dtype | None = None  # .to()'s dtype

    def run(self, pin: Pin, up: Up, device: Any) -> Callable[[], torch.Tensor]:
        host, device_side = self.sides(pin, up)
        if self.how == "to":
            return lambda: host.to(device, self.dtype, non_blocking=True) if self.dtype else \
                host.to(device, non_blocking=True)
        if self.how == "up":
            return lambda: device_side.copy_(host, non_blocking=True)
        return lambda: host.copy_(device_side, non_blocking=True)


COPIES = {
    "contiguous, .to()": Copy("to", lambda pin, up: (pin(GRID), None), True),
    # _to_copy makes the device tensor with the same strides: one run of memory on both sides
    "transposed, .to()": Copy("to", lambda pin, up: (pin(GRID).t(), None), True),
    "a slice of a wider tensor's columns, .to()": Copy("to", lambda pin, up: (pin(GRID)[:, :3], None), False),
    # pin_memory() keeps a view's strides, gaps included (ATen's _pin_memory): pinning does not close them
    "a slice of a wider tensor's columns, pinned as a slice, .to()": Copy(
        "to", lambda pin, up: (pin(GRID[:, :3]), None), False),
    # pin_memory() keeps a view's strides, gaps included (ATen's _pin_memory): pinning does not close them
    "a slice of a wider tensor's columns, pinned as a slice, .to()": Copy(
        "to", lambda pin, up: (pin(GRID[:, :3]), None), False),
    "every other row, .to()": Copy("to", lambda pin, up: (pin(GRID)[::2], None), False),
    # a dtype change: the host side is made contiguous, as a contiguous tensor already is (converted on the device)
    "contiguous, .to() with a dtype change": Copy("to", lambda pin, up: (pin(GRID), None), True, torch.float64),
    "transposed, .to() with a dtype change": Copy("to", lambda pin, up: (pin(GRID).t(), None), False, torch.float64),
    "transposed into a contiguous device tensor, copy_": Copy(
        "up", lambda pin, up: (pin(GRID).t(), up(torch.zeros(6, 4))), False),
    "transposed into a transposed device tensor, copy_": Copy(
        "up", lambda pin, up: (pin(GRID).t(), up(torch.zeros(4, 6)).t()), True),
    "contiguous into a transposed device tensor, copy_": Copy(
        "up", lambda pin, up: (pin(GRID.t().contiguous()), up(torch.zeros(4, 6)).t()), True),
    "one row broadcast over every row, copy_": Copy("up", lambda pin, up: (pin(GRID[0]), up(torch.zeros(4, 6))), False),
    "a transposed device tensor into a contiguous pinned buffer, copy_": Copy(
        "down", lambda pin, up: (pin(torch.zeros(6, 4)), up(GRID).t()), True),
    "a contiguous device tensor into a transposed pinned buffer, copy_": Copy(
        "down", lambda pin, up: (pin(torch.zeros(4, 6)).t(), up(GRID.t().contiguous())), False),
}
NAMES = list(COPIES)
# what each copy's result holds, worked out on the host
EXPECTED = {name: GRID[:, :3] if "columns" in name else GRID[::2] if "every other" in name
            else GRID[0].expand(4, 6) if "broadcast" in name else GRID if name.startswith("contiguous, .to()")
            else GRID.t() for name in NAMES}


@pytest.mark.sim
def test_the_table_holds_both_answers_both_ways() -> None:
    """Uploads and downloads, each with and without a temporary: a rule that always (or never) stages fails it."""
    kinds = {(copy.how == "down", copy.as_they_lie) for copy in COPIES.values()}
    assert kinds == {(True, True), (True, False), (False, True), (False, False)}


@pytest.mark.sim
def test_density() -> None:
    assert is_dense((4, 6), (6, 1)) and is_dense((6, 4), (1, 6)) and is_dense((1, 6), (99, 1))
    assert not is_dense((4, 3), (6, 1)) and not is_dense((2, 6), (12, 1)) and not is_dense((4, 6), (0, 1))


@pytest.mark.sim
def test_a_host_tensor_that_is_not_pinned_never_runs_alone() -> None:
    assert copies_as_they_lie(GRID) and not is_async_host_side(GRID)


@pytest.mark.sim
@pytest.mark.parametrize("name", NAMES)
def test_the_rule_says_what_cuda_does(name: str) -> None:
    copy = COPIES[name]
    keeping_layout = lambda t: copy_keeping_layout(t, lambda span: torch.empty(span, dtype=t.dtype))  # noqa: E731
    host, device_side = copy.sides(keeping_layout, lambda t: t.clone())
    assert copies_as_they_lie(host, device_side, copy.dtype) == copy.as_they_lie


def _staged_kind(copy: Copy) -> str:
    return (SyncKind.PAGEABLE_D2H if copy.how == "down" else SyncKind.STAGED_COPY).value


@EACH_DEVICE
@pytest.mark.parametrize("name", NAMES)
def test_count_syncs_counts_a_temporary_as_the_copy_it_makes(device: str, name: str) -> None:
    copy = COPIES[name]
    target = pick_device()
    with simulated_pinning(True) if device == "sim" else nullcontext():
        run = copy.run(lambda t: t.pin_memory(), lambda t: to_device(t, target), target)
        with count_syncs() as report:
            out = run()
    assert [e.kind.value for e in report.events + report.staged] == ([] if copy.as_they_lie else [_staged_kind(copy)])
    if copy.how != "down" or not copy.as_they_lie:  # an asynchronous download holds its values after a wait only
        assert torch.equal(out.cpu().double(), EXPECTED[name].double())


@pytest.fixture(scope="module")
def gpu_process() -> Iterator[Any]:
    from synclab.sim.device_process.handle import SimulatedGPU

    device = SimulatedGPU()
    yield device
    device.close()


@pytest.mark.sim
@pytest.mark.parametrize("name", NAMES)
def test_the_device_process_counts_a_temporary_as_the_copy_it_makes(gpu_process: Any, name: str) -> None:
    copy = COPIES[name]
    run = copy.run(lambda t: t.pin_memory(), lambda t: t.to("simgpu"), "simgpu")
    before = len(gpu_process.ledger().transfers)
    out = run()
    assert [t.kind for t in gpu_process.ledger().transfers[before:]] == (
        [] if copy.as_they_lie else [_staged_kind(copy)])
    if copy.how != "down":
        assert torch.equal(out.cpu().double(), EXPECTED[name].double())


@pytest.mark.cuda
@pytest.mark.parametrize("name", NAMES)
def test_the_profiler_shows_the_temporary_on_a_gpu(name: str) -> None:
    """The memcpy's own name says where its host bytes were: "Pinned" for the caller's buffer, "Pageable" for a
    temporary torch made (Kineto's names, as synclab.profiling reads them)."""
    from synclab.profiling import profile

    assert has_cuda()
    copy = COPIES[name]
    trace = profile(copy.run(lambda t: t.pin_memory(), lambda t: t.to("cuda"), "cuda"), warmup=0)
    copies = [e.name for e in trace.events if e.category == "copy"]
    assert copies, "the profiler saw no memcpy"
    assert any("Pageable" in c for c in copies) == (not copy.as_they_lie), copies
