"""Chapter 3, Exercise 3.6: predict which sync each snippet performs, then measure it."""

from __future__ import annotations

import random
from typing import Any, Callable

import torch

from synclab.checks import Check, CheckReport, expect, keyed_by_name, run_checks
from synclab.device import is_pin_memory_available, pick_device, to_device
from synclab.answer_keys import answer_key
from synclab.syncs import SyncKind


from synclab.sim.pinning import simulated_pinning
from synclab.pinned_transfers.checks.common import counted


def _snippets(device: Any = None) -> dict[str, Callable[[], object]]:
    """Snippets whose sync the reader predicts. ``x``, ``idx``, ``seq_lens``, ``rows`` live on the device."""
    dev = device if device is not None else pick_device()
    x = to_device(torch.arange(16, dtype=torch.int32), dev)  # [16] device
    idx = to_device(torch.tensor([0, 2]), dev)  # [2] device
    seq_lens = to_device(torch.tensor([7, 3]), dev)  # [2] device
    rows = to_device(torch.ones(4, 8), dev)  # [4, 8] device
    buf = to_device(torch.zeros(32, dtype=torch.int32), dev)  # [32] device
    ids = [3, 1, 4, 1, 5]
    return {
        "a: torch.tensor(ids, device=dev)": lambda: torch.tensor(ids, device=dev),
        "b: torch.tensor(ids).to(dev, non_blocking=True)": lambda: torch.tensor(ids).to(dev, non_blocking=True),
        "c: torch.tensor(ids, pin_memory=pin).to(dev, non_blocking=True)":
            lambda: torch.tensor(ids, pin_memory=is_pin_memory_available()).to(dev, non_blocking=True),
        "d: buf[16:].fill_(x[-1].item())": lambda: buf[16:].fill_(x[-1].item()),
        "e: buf[16:] = x[-1]": lambda: buf.__setitem__(slice(16, None), x[-1]),
        "f: rows[idx] = 0": lambda: rows.__setitem__(idx, 0),
        "g: rows.index_fill_(0, idx, 0)": lambda: rows.index_fill_(0, idx, 0),
        "h: rows[idx].zero_()": lambda: rows[idx].zero_(),
        "i: torch.arange(seq_lens[0])": lambda: torch.arange(seq_lens[0]),
        "j: x.to('cpu', non_blocking=True)": lambda: x.to("cpu", non_blocking=True),
    }


SNIPPETS = list(_snippets("cpu"))  # the names only: no device touched at import

# What each snippet's line does, told to a reader whose prediction was off: the reason, not the measured kind.
WHAT_THE_LINE_DOES = {
    "a": "torch.tensor(..., device=dev) builds the tensor from the list on the host, then copies it to the device "
         "with a blocking copy, queued behind the device's work",
    "b": "torch.tensor(ids) lives in pageable memory; before .to() returns, the host itself copies it into a pinned "
         "staging buffer (CUDA promises only that such a copy may synchronize: it may also wait for the device)",
    "c": "the list goes into pinned memory first, so the non_blocking copy is only queued and .to() returns at once",
    "d": ".item() brings the last value of x to the host before fill_ can take it as a number",
    "e": "a 0-d device tensor assigned to a slice is broadcast by a kernel on the device; no value comes to the host",
    "f": "index_put_ wraps the Python 0 in a host tensor and copies it to the device, blocking, before it scatters",
    "g": "index_fill_ hands the 0 to its kernel as an argument: nothing is copied and nothing is read back",
    "h": "rows[idx] with a tensor index gathers the rows into a new device tensor and zero_() zeroes that copy, all "
         "on the device (rows itself is left unchanged)",
    "i": "torch.arange needs its length as a host number, so seq_lens[0] is read back from the device first",
    "j": "PyTorch allocates the destination itself, in pinned memory, and queues the copy; the call returns at once "
         "and the values arrive later",
}


@answer_key("3.6", role="prediction measurer")
def _measure_snippet_syncs() -> dict[str, str]:
    """What each snippet of Exercise 3.6 makes the host wait for (a ``SyncKind`` value, or ``"none"``), on a GPU machine.

    A staging copy (``SyncKind.STAGED_COPY``) counts here too: the host waits for its own copy, not the device.
    """
    measured = {}
    with simulated_pinning(True):
        for name, snippet in _snippets().items():
            _, report = counted(snippet)
            kinds = sorted({e.kind.value for e in report.events + report.staged})
            measured[name] = " + ".join(kinds) if kinds else "none"
    return measured


def check_sync_predictions(predict: Callable[[], dict[str, Any]], seed: int | None = None) -> CheckReport:
    """Exercise 3.6: compare the reader's predicted sync kinds (``predict()``) with ``count_syncs``."""

    def run(predict: Callable[[], dict[str, Any]], rng: random.Random) -> None:
        preds = predict()
        expect(isinstance(preds, dict), "my_predictions() must return a dict", got=type(preds).__name__)
        preds = keyed_by_name(preds, SNIPPETS)
        expect(set(preds) == set(SNIPPETS), "predict every snippet, keyed by its name or its letter",
               expected=SNIPPETS, got=sorted(map(str, preds)),
               hint="the keys are the table's names ('a: torch.tensor(ids, device=dev)', ...) or their letters")
        names = [k for k, v in preds.items() if isinstance(v, str) and v.removeprefix("SyncKind.") in SyncKind.__members__]
        expect(not names, "use the SyncKind member, not its name as a string",
               got="; ".join(f"{k}: {preds[k]!r}" for k in names[:3]),
               expected=f"SyncKind.{preds[names[0]].removeprefix('SyncKind.')}" if names else "",
               hint="a prediction is a member of the enum (from synclab.syncs import SyncKind), or None for no "
                    "wait: SyncKind.H2D_COPY, not 'H2D_COPY'")
        said = {k: "none" if v is None else getattr(v, "value", v) for k, v in preds.items()}
        measured = _measure_snippet_syncs()
        wrong = [k for k in SNIPPETS if said[k] != measured[k]]
        expect(not wrong, f"{len(wrong)} prediction(s) off. What each line does: " + "; ".join(
                   f"{k}: you said {said[k]!r}, but {WHAT_THE_LINE_DOES[k.split(':')[0]]}" for k in wrong),
               hint="name the SyncKind, or None; the host waits for a device VALUE, a blocking COPY, or staged memory")

    check = Check("3.6", "predicted syncs match count_syncs", run, random=False)
    return run_checks("Exercise 3.6 — which sync, and why", [check], predict, seed=seed)

