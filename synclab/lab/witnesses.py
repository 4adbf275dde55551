"""Witnesses: what each passed check found right, as a digest the grader compares with a right answer's.

Attached by the grader's worker (:mod:`synclab.lab.judge_worker`) and by the package's tests through the checks'
one hook (:func:`synclab.checks.attach_observer`); a learner's check runs without it. A check reports each result it
compared exactly and found right (:func:`synclab.checks.found_right`); the recorder keeps a digest of them per check
run. The grader then counts a passed check only where its digest is the right answer's on the same seed
(:func:`synclab.lab.judge.verify`): the verdict rests on results it compares, not on the word of the process that
ran the answer. Only values compared exactly are reported, so every right answer gives the same digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence, Set
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from synclab.checks import Check, CheckReport, Outcome, attach_observer, observer


def canonical(value: Any) -> Any:
    """``value`` as plain JSON data, equal for values that compare equal: a tensor or an array as its values, a
    tuple as a list, a whole float as an int, a set sorted."""
    if hasattr(value, "tolist") and callable(value.tolist):  # a tensor, a NumPy array or scalar
        return canonical(value.tolist())
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return int(value) if isinstance(value, bool) else value
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else repr(float(value))
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [canonical(v) for v in value]  # lists, tuples, and the checks' counting lists
    if isinstance(value, Set):
        return sorted((canonical(v) for v in value), key=repr)
    if isinstance(value, Mapping):
        return sorted(([canonical(k), canonical(v)] for k, v in value.items()), key=repr)
    return repr(value)


def _tensor_line(t: Any) -> str:
    """A tensor compared exactly, as its dtype, shape and a digest of its bytes (its values as JSON would cost the
    check more than the comparison did)."""
    host = t.detach().cpu().contiguous()
    return f"tensor {host.dtype} {list(host.shape)} {hashlib.sha256(host.numpy().tobytes()).hexdigest()[:16]}"


class WitnessRecorder:
    """The checks' observer: a digest of what each check run found right, by outcome.

    ``seed``: the one every check run draws its random cases from (the grader's, so that a right answer runs the same
    cases); None leaves each run its own. ``child``: what processes the checks start run first, and where what they
    report goes (the grader's audit, :mod:`synclab.lab.audit`); None: nothing.
    """

    def __init__(self, seed: int | None = None, child: Any = None) -> None:
        self._seed, self._child = seed, child
        self._running: list[list[str]] = []  # one list per check running (a check never runs inside another)
        self._digests: dict[int, tuple[Outcome, str]] = {}  # by id(outcome); the outcome kept, so its id is not reused

    def seed(self) -> int | None:
        return self._seed

    def check_started(self, check: Check) -> None:
        self._running.append([])

    def found_right(self, value: Any, exact_tensor: bool) -> None:
        if self._running:
            line = _tensor_line(value) if exact_tensor else json.dumps(canonical(value), sort_keys=True,
                                                                       separators=(",", ":"))
            self._running[-1].append(line)

    def check_ended(self, check: Check, outcome: Outcome) -> None:
        seen = self._running.pop() if self._running else []
        digest = hashlib.sha256("\n".join(seen).encode()).hexdigest()[:20] if seen and outcome.ok else ""
        self._digests[id(outcome)] = (outcome, digest)

    def witness(self, outcome: Outcome) -> str:
        """The digest of what ``outcome``'s check found right: "" where it failed or compared nothing exactly."""
        kept = self._digests.get(id(outcome))
        return kept[1] if kept is not None and kept[0] is outcome else ""

    def witnesses(self, report: CheckReport) -> dict[str, str]:
        """Each check of ``report`` by its key (``"4.1/fixed-cases"``, :attr:`synclab.checks.Outcome.key`): its
        :meth:`witness`."""
        return {o.key: self.witness(o) for o in report.outcomes}

    def for_child(self) -> Callable[[], Callable[[], list[str]]] | None:
        return self._child.for_child() if self._child is not None else None

    def child_saw(self, lines: list[str]) -> None:
        if self._child is not None:
            self._child.child_saw(lines)


@contextmanager
def recording(seed: int | None = None) -> Iterator[WitnessRecorder]:
    """A :class:`WitnessRecorder` attached for the block (the one attached before is attached again after)."""
    before, recorder = observer(), WitnessRecorder(seed)
    attach_observer(recorder)
    try:
        yield recorder
    finally:
        attach_observer(before)
