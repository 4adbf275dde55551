"""The GPU suite's record: what each step of ``make gpu-check`` gave, kept beside the device's references.

``tools/gpu-check.sh`` calls ``python -m synclab.lab.gpu_record STEP RC SECONDS LOG`` after each step; the record,
``data/reference/<device>/gpu-check.json``, says which commit ran, on which device and torch, and per step its exit
status, its pytest counts and the names of the tests that failed. Committed with the references, it answers "which
commit last passed ``make gpu-check`` here?" (``tests/test_gpu_record.py`` reads every stored one).
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from synclab.provenance import Provenance, lab_commit
from synclab.reference import REFERENCE_DIR

RECORD = "gpu-check.json"
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)\b")
# a test's id, its parameters' id whole: "test_sync_table[tensordot with device dims (each row read back)-cuda]"
_FAILED = re.compile(r"^(?:FAILED|ERROR) ([^\s\[]+(?:\[[^\n]*?\])?)(?= - |\s*$)", re.M)


def pytest_counts(log: str) -> dict[str, Any]:
    """The counts of pytest's last summary line in ``log`` (``{}`` where it has none), and the failed tests' ids."""
    # "=== 2 failed, 118 passed in 93.12s (0:01:33) ===", or under -q "118 passed in 93.12s"
    summaries = [line for line in log.splitlines() if _COUNT.search(line) and re.search(r" in [\d.]+s", line)]
    if not summaries:
        return {}
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in _COUNT.findall(summaries[-1])}
    counts["failures"] = sorted(set(_FAILED.findall(log)))
    return counts


def _commit() -> dict[str, Any]:
    """The lab's commit (``SYNCLAB_COMMIT`` where the checkout travelled without its history), and whether the working
    tree differed from it (``+``)."""
    commit = lab_commit()
    return {"commit": commit.rstrip("+"), "dirty": commit.endswith("+")}


def add_step(step: str, rc: int, seconds: float, log: str, root: Path = REFERENCE_DIR,
             here: Provenance | None = None) -> Path:
    """Add one step's outcome to this device's record (a new commit starts a new record); its path. Only a GPU's:
    a CPU run is never kept among the references."""
    here = here or Provenance.here()
    if not here.is_gpu:
        raise RuntimeError("no GPU here: the GPU suite's record is kept for GPU runs only")
    path = root / here.slug / RECORD
    started = {**_commit(), "device": here.device, "torch": here.torch_version, "cuda": here.cuda_runtime,
               "driver": here.driver, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "steps": {}}
    record = json.loads(path.read_text()) if path.exists() else started
    if record.get("commit") != started["commit"]:
        record = started
    record["steps"][step] = {"rc": rc, "seconds": round(seconds), **pytest_counts(log)}
    record["passed"] = all(s["rc"] == 0 and not s.get("failed") and not s.get("error")
                           for s in record["steps"].values())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def main(argv: list[str]) -> int:
    step, rc, seconds, log = argv
    path = add_step(step, int(rc), float(seconds), Path(log).read_text(errors="replace"))
    print(f"recorded {step} in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
