"""Chapter 3's shared check helpers: count a call's syncs, demand none, run as on WSL."""

from __future__ import annotations

from typing import Any, Callable

from synclab.checks import CheckFailed, expect
from synclab.engine.sim_pinning import PinnedMemoryUnavailable
from synclab.syncs import SyncReport, count_syncs

PIN_HINT = ("build the host tensor in pinned memory (pin_memory=<is_pin_memory_available()>, or t.pin_memory()) "
            "and upload it with .to(device, non_blocking=True)")
WSL_HINT = ("on WSL is_pin_memory_available() is False and pinning raises: pass the flag "
            "(pin_memory=self.pin_memory), never a hard-coded True")


def counted(fn: Callable[[], Any], simulate: bool | None = None) -> tuple[Any, SyncReport]:
    """``fn()`` and the syncs it made (``simulate``: as ``count_syncs``; True for the simulated device on a GPU box)."""
    with count_syncs(simulate) as report:
        result = fn()
    return result, report


def expect_no_syncs(report: SyncReport, what: str, hint: str, case: str = "", staged_ok: bool = False) -> None:
    """No device wait; and, unless ``staged_ok`` (WSL: nothing can be pinned), no staging copy either."""
    expect(report.count == 0, f"{what} synchronised with the device", expected="0 syncs",
           got=f"{report.count}: " + "; ".join(f"{e.kind.value} at {e.where} `{e.code}`" for e in report.events),
           hint=hint, case=case)
    if not staged_ok:
        expect(report.staged_count == 0, f"{what} uploaded from pageable memory: the host copied the data into a "
               "staging buffer itself", expected="0 staging copies",
               got=f"{report.staged_count}: " + "; ".join(f"at {e.where} `{e.code}`" for e in report.staged),
               hint=hint, case=case)


def on_wsl(fn: Callable[[], Any], case: str) -> tuple[Any, SyncReport]:
    """Run ``fn`` as on WSL: pinning unavailable. It must not raise."""
    try:
        return counted(fn)
    except PinnedMemoryUnavailable as exc:
        raise CheckFailed("asked for pinned memory where the platform has none", got=str(exc).split(":")[0],
                          hint=WSL_HINT, case=case) from None
