"""Report texts against stored snapshots: what a failed check tells the reader, kept where a reviewer reads it.

A check's message is worded in one place, its check's room; the texts the suite pins are stored whole under
``tests/snapshots/`` (one file each), so that rewording a message touches that room and the snapshots it changes,
which ``pytest --refresh-snapshots`` rewrites (read the diff before committing it). A clause's few words
(:attr:`synclab.checks.Clause.says`, beside the message in the same room) still say which fault the message must
name.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
REFRESH_ENV = "SYNCLAB_REFRESH_SNAPSHOTS"  # set by conftest.py for ``pytest --refresh-snapshots``

# What differs from run to run, or moves with any edit above a line, and says nothing of the message: times,
# addresses in a repr, temporary paths, and line numbers (the code a report quotes stays, and says which line).
_VOLATILE = [(re.compile(r"\b\d+(\.\d+)?\s*(s|ms|us|µs)\b"), "TIME"), (re.compile(r"0x[0-9a-fA-F]+"), "ADDRESS"),
             (re.compile(r"/tmp/[^\s'\"]+"), "TMPPATH"), (re.compile(r"(\.py|<string>):\d+\b"), r"\1:LINE"),
             (re.compile(r"\bline \d+\b"), "line N")]


def normalised(text: str) -> str:
    for pattern, stand_in in _VOLATILE:
        text = pattern.sub(stand_in, text)
    return text.rstrip() + "\n"


def matches_snapshot(name: str, text: str) -> None:
    """``text`` is the stored snapshot ``tests/snapshots/<name>.txt`` (written instead, with ``--refresh-snapshots``)."""
    path = SNAPSHOTS / f"{name}.txt"
    text = normalised(text)
    if os.environ.get(REFRESH_ENV):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"no snapshot {path.relative_to(SNAPSHOTS.parent.parent)}: run pytest --refresh-snapshots"
    stored = path.read_text()
    diff = "".join(difflib.unified_diff(stored.splitlines(True), text.splitlines(True), "stored", "now"))
    assert stored == text, f"{path.name} differs (pytest --refresh-snapshots rewrites it, if the change is meant):\n{diff}"


def matches_report_snapshot(report: object, part: str = "") -> None:
    """``str(report)`` is the snapshot ``tests/snapshots/reports/<test file>/<test>[<part>].txt``, named after the
    running test (its parameters included), so that a test pins a report's whole text, not a few words of it."""
    current = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]  # "tests/test_x.py::test_y[0] (call)"
    path, test = current.split("::", 1)
    name = re.sub(r"[^\w.\-\[\]]+", "_", test + (f"[{part}]" if part else ""))
    matches_snapshot(f"reports/{Path(path).stem}/{name}", str(report))


def failure_text(outcome) -> str:
    """What a failed check tells the reader, label by label, as a snapshot stores it."""
    return "\n".join(f"{label}: {value}" for label, value in (
        ("check", outcome.name), ("case", outcome.case), ("message", outcome.message), ("expected", outcome.expected),
        ("got", outcome.got), ("hint", outcome.hint)) if value)
