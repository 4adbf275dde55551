"""Chapter 3's shared check helpers: count a call's syncs, demand none, run as on WSL."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from synclab.checks import CheckFailed, expect
from synclab.device import has_cuda, is_device_tensor, is_pinned_host
from synclab.sim import cuda as sim_cuda
from synclab.sim.pinning import PinnedMemoryUnavailable
from synclab.syncs import (SyncKind, SyncReport, _target_is_device, _user_frame, attribute_syncs_to_callers, count_syncs,
                           location)

attribute_syncs_to_callers(__file__)  # a copy seen by a watcher here belongs to the reader's line that made it

PIN_HINT = ("build the host tensor in pinned memory (pin_memory=is_pin_memory_available(), self.pin_memory in a "
            "method, or t.pin_memory()) and upload it with .to(device, non_blocking=True); upload it without gaps: "
            "a view of pinned memory with gaps (buf[:, :n] of a wider buf) goes up through a pageable temporary "
            "torch makes for it, and a tensor computed from a pinned one (ids_cpu != 0, ids_cpu.int()) is a new "
            "tensor, in pageable memory")
WSL_HINT = ("on WSL is_pin_memory_available() is False and pinning raises: pass the platform's flag "
            "(pin_memory=is_pin_memory_available(), or self.pin_memory in a method), never a hard-coded True, and "
            "call t.pin_memory() only where that flag is True")


def counted(fn: Callable[[], Any], simulate: bool | None = None) -> tuple[Any, SyncReport]:
    """``fn()`` and the syncs it made (``simulate``: as ``count_syncs``; True for the simulated device on a GPU box).

    On the simulated device the call runs on the simulated GPU (:func:`synclab.sim.cuda.simulated_cuda`), where the
    reader's code sees CUDA as on a GPU: a "to be safe" ``torch.cuda.synchronize()`` behind ``is_available()`` is
    taken, and counted."""
    on_the_simulated_gpu = not has_cuda() and not sim_cuda.is_simulating()
    with sim_cuda.simulated_cuda() if on_the_simulated_gpu else nullcontext(), count_syncs(simulate) as report:
        result = fn()
    return result, report


# What a sync of each kind means, for a check whose own hint is about something else (the WSL checks' "keep
# non_blocking=True" says nothing about a .cpu() or a .tolist() of device data).
READ_BACK_HINT = ("this line reads device data back to the host: where the host already has the value (the *_cpu "
                  "arrays, the Python lists you were given) use that; where only the device has it, keep the work "
                  "on the device (an assignment between device tensors, a kernel)")
KIND_HINTS = {
    SyncKind.ITEM: READ_BACK_HINT, SyncKind.TOLIST: READ_BACK_HINT, SyncKind.BOOL: READ_BACK_HINT,
    SyncKind.TENSOR_SLICE: READ_BACK_HINT, SyncKind.D2H_COPY: READ_BACK_HINT, SyncKind.PRINT: READ_BACK_HINT,
    SyncKind.NONZERO: "the result's size depends on device data, so the host must read it back: size it from host "
                      "metadata instead",
    SyncKind.BOOL_MASK_INDEX: "a boolean mask makes the result's size depend on device data: use index_fill_ / "
                              "masked_fill_ / torch.where, which keep the size",
    SyncKind.H2D_COPY: "a synchronous upload: build the data on the host (pinned where the platform allows) and "
                       "copy it with .to(device, non_blocking=True)",
}
# A wait the code asks for itself: every check's own hint would name another fault.
_WAIT_HINT = ("a wait for the device that nothing here needs: a non_blocking upload is queued on the stream before "
              "any kernel that reads it, so the device orders it; on a GPU this line stalls the host until the queue "
              "drains. Remove it")
_WAIT_KINDS = {kind.value for kind in (SyncKind.DEVICE_SYNC, SyncKind.STREAM_SYNC, SyncKind.EVENT_SYNC)}
KIND_HINTS.update({kind: _WAIT_HINT for kind in SyncKind if kind.value in _WAIT_KINDS})


def report_data(report: SyncReport) -> dict[str, Any]:
    """What a check reads of a sync report, as plain data (what a runner sends back from the answer's process)."""
    return {"count": report.count, "events": [[e.kind.value, e.where, e.code] for e in report.events],
            "staged_count": report.staged_count, "staged": [[e.where, e.code] for e in report.staged]}


def expect_no_syncs(report: SyncReport | dict[str, Any], what: str, hint: str, case: str = "",
                    staged_ok: bool = False) -> None:
    """No device wait; and, unless ``staged_ok`` (WSL: nothing can be pinned), no staging copy either. ``report``: a
    sync report, or its :func:`report_data`.

    Under ``staged_ok`` the check's own hint is about non_blocking; a sync of another kind gets the hint of its kind.
    """
    said = report if isinstance(report, dict) else report_data(report)
    events = said["events"]
    if events and (staged_ok or events[0][0] in _WAIT_KINDS):
        hint = KIND_HINTS.get(SyncKind(events[0][0]), hint)
    expect(said["count"] == 0, f"{what} synchronised with the device", expected="0 syncs",
           got=f"{said['count']}: " + "; ".join(f"{kind} at {where} `{code}`" for kind, where, code in events),
           hint=hint, case=case)
    if not staged_ok:
        expect(said["staged_count"] == 0, f"{what} sent data from pageable memory: the host copied it into a "
               "staging buffer itself", expected="0 staging copies",
               got=f"{said['staged_count']}: " + "; ".join(f"at {where} `{code}`" for where, code in said["staged"]),
               hint=hint, case=case)


def on_wsl(fn: Callable[[], Any], case: str) -> tuple[Any, SyncReport]:
    """Run ``fn`` as on WSL: pinning unavailable. It must not raise."""
    try:
        return counted(fn)
    except PinnedMemoryUnavailable as exc:
        raise pinning_refused(str(exc).split(":")[0], case) from None


def pinning_refused(said: str, case: str) -> CheckFailed:
    """The failure of a call that asked for pinned memory on a platform without any (WSL); ``said``: what it was
    told (a runner sends it back as ``{"unavailable": said}``)."""
    return CheckFailed("asked for pinned memory where the platform has none", got=said, hint=WSL_HINT, case=case)


WAIT_HINT = ("a non_blocking device-to-host copy returns before the data is there: wait (synchronize the stream, "
             "or an event recorded after the copy) before you read the host buffer; or read it back with "
             "tensor.cpu(), which waits by itself")


@dataclass
class AsyncRead:
    """A ``non_blocking`` device-to-host copy into pinned memory: it returns before the data has landed."""

    where: str  # the reader's line
    syncs_before: int  # the report's device waits when it was made: a later one covers it


class _AsyncReads(TorchFunctionMode):
    def __init__(self, reads: list[AsyncRead], report: SyncReport) -> None:
        super().__init__()
        self.reads, self.report = reads, report

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        non_blocking = bool(kwargs.get("non_blocking")) or any(a is True for a in args[1:])
        if non_blocking and args and isinstance(args[0], torch.Tensor):
            if name == "to" and is_device_tensor(args[0]) and _target_is_device(args[1:], kwargs) is False:
                self._add()  # torch gives it a pinned destination: asynchronous
            elif (name == "copy_" and len(args) >= 2 and isinstance(args[1], torch.Tensor) and is_device_tensor(args[1])
                  and not is_device_tensor(args[0]) and is_pinned_host(args[0])):
                self._add()  # into pageable memory it would wait (a PAGEABLE_D2H sync): no hazard then
        return func(*args, **kwargs)

    def _add(self) -> None:
        filename, lineno, _, code = _user_frame()
        self.reads.append(AsyncRead(location(filename, lineno, code), len(self.report.events)))


@contextmanager
def watch_async_reads(report: SyncReport) -> Iterator[list[AsyncRead]]:
    """The ``non_blocking`` device-to-host copies made in the block (inside ``count_syncs``, as ``report``).

    After the block, :func:`unwaited` tells which of them no wait covered.
    """
    reads: list[AsyncRead] = []
    with _AsyncReads(reads, report):
        yield reads


def unwaited(reads: list[AsyncRead], report: SyncReport) -> list[str]:
    """Where each read was made that no device wait followed: its host buffer may not hold the data yet."""
    return [r.where for r in reads if not any(e.kind.waits_for_device for e in report.events[r.syncs_before:])]
