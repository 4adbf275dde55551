"""Chapter 3, Exercise 3.6: predict which sync each snippet performs, then measure it."""

from __future__ import annotations

import random
from typing import Any, Callable

import numpy
import torch

from synclab.checks import Check, CheckReport, expect, keyed_by_name, run_checks, found_right
from synclab.device import is_pin_memory_available, pick_device, to_device
from synclab.answer_keys import answer_key
from synclab.syncs import SyncKind


from synclab.sim.pinning import simulated_pinning
from synclab.pinned_transfers.checks.common import counted


def _snippets(device: Any = None) -> dict[str, Callable[[], object]]:
    """Snippets whose sync the reader predicts. ``x``, ``idx``, ``seq_lens``, ``rows`` and ``buf`` live on the device.

    None of them is a line the page shows: each applies one of its rules through another call (``as_tensor`` for
    ``tensor``, a NumPy array for a list, ``int(t)`` for ``t.item()``, a slice for a tensor index).
    """
    dev = device if device is not None else pick_device()
    x = to_device(torch.arange(16, dtype=torch.int32), dev)  # [16] device
    idx = to_device(torch.tensor([0, 2]), dev)  # [2] device
    seq_lens = to_device(torch.tensor([7, 3]), dev)  # [2] device
    rows = to_device(torch.ones(4, 8), dev)  # [4, 8] device
    buf = to_device(torch.zeros(32, dtype=torch.int32), dev)  # [32] device
    ids = [3, 1, 4, 1, 5]
    array = numpy.array(ids)  # host, pageable
    return {
        "a: torch.as_tensor(ids, device=dev)": lambda: torch.as_tensor(ids, device=dev),
        "b: torch.from_numpy(array).to(dev, non_blocking=True)": lambda: torch.from_numpy(array).to(dev, non_blocking=True),
        "c: torch.tensor(ids).pin_memory().to(dev, non_blocking=True)":
            lambda: torch.tensor(ids).pin_memory().to(dev, non_blocking=True),
        "d: int(x[-1])": lambda: int(x[-1]),
        "e: buf[:16] = x": lambda: buf.__setitem__(slice(None, 16), x),
        "f: rows[idx] = 1.5": lambda: rows.__setitem__(idx, 1.5),
        "g: rows[:, 0] = 1.5": lambda: rows.__setitem__((slice(None), 0), 1.5),
        "h: rows[rows > 0]": lambda: rows[rows > 0],
        "i: torch.ones(seq_lens[1])": lambda: torch.ones(seq_lens[1]),
        "j: torch.empty(16, dtype=torch.int32).copy_(x, non_blocking=True)":
            lambda: torch.empty(16, dtype=torch.int32).copy_(x, non_blocking=True),
    }


SNIPPETS = list(_snippets("cpu"))  # the names only: no device touched at import

# What each snippet's line does, told to a reader whose prediction was off: the reason, not the measured kind.
WHAT_THE_LINE_DOES = {
    "a": "torch.as_tensor(list, device=dev) builds the tensor on the host, as torch.tensor does, then copies it to "
         "the device with a blocking copy, queued behind the device's work",
    "b": "a NumPy array lives in pageable memory; before .to() returns, the host itself copies it into a pinned "
         "staging buffer (CUDA promises only that such a copy may synchronize: it may also wait for the device)",
    "c": "pin_memory() copies the host tensor into pinned memory on the host (no device involved), so the "
         "non_blocking copy is only queued and .to() returns at once",
    "d": "int() on a device tensor reads its one value back, as .item() does",
    "e": "both sides are on the device: the copy is a kernel queued on the stream; no value comes to the host",
    "f": "a tensor index makes this index_put_, which wraps the Python 1.5 in a host tensor and copies it to the "
         "device, blocking, before it scatters",
    "g": "a slice and an int are plain indexing: rows[:, 0] is a view, and the assignment fills it with the 1.5 as a "
         "kernel argument; nothing is copied and nothing is read back",
    "h": "a boolean mask selects as many entries as the device data says: the host must learn that count before it "
         "can make the result",
    "i": "torch.ones needs its size as a host number, so seq_lens[1] is read back from the device first",
    "j": "the destination is pageable memory you made yourself: the copy cannot run on its own, so copy_ returns only "
         "when it is done, after everything queued before it",
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


def _check_sync_predictions(predict: Callable[[], dict[str, Any]], rng: random.Random) -> None:
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
    expect(not wrong, f"{len(wrong)} of {len(SNIPPETS)} prediction(s) off. What each line does: " + "; ".join(
               f"{k}: you said {said[k]!r}, but {WHAT_THE_LINE_DOES[k.split(':')[0]]}" for k in wrong),
           hint="name the SyncKind, or None; the host waits for a device VALUE, a blocking COPY, or staged memory",
           share=1 - len(wrong) / len(SNIPPETS),  # each right prediction earns its share
           case=f"the {len(SNIPPETS)} snippets, each counted on a GPU machine with pinned memory")
    found_right({k: said[k] for k in SNIPPETS})  # every right answer says the same


CHECKS_3_6 = [Check("3.6", "predicted syncs match count_syncs", _check_sync_predictions, random=False,
                    id="predictions")]


def check_sync_predictions(predict: Callable[[], dict[str, Any]], seed: int | None = None) -> CheckReport:
    """Exercise 3.6: compare the reader's predicted sync kinds (``predict()``) with ``count_syncs``."""
    return run_checks("Exercise 3.6 — which sync, and why", CHECKS_3_6, predict, seed=seed)
