"""Helpers for the chapter tests: read a check report, and prove every check can fail."""

from __future__ import annotations

import functools
from typing import Any, Iterable

from synclab.checks import Check, CheckReport, Outcome, attach_observer
from synclab.lab.witnesses import WitnessRecorder

# The grader's witness recorder (synclab.lab.witnesses), attached in every test process that imports this module: it
# only records what the checks report as found right, and the checks run the same with it.
RECORDER = WitnessRecorder()
attach_observer(RECORDER)


def outcome(report: CheckReport, name_part: str) -> str:
    """The status of the one check whose name contains ``name_part``."""
    (match,) = [o for o in report.outcomes if name_part in o.name]
    return match.status


def witnesses(report: CheckReport) -> dict[str, str]:
    """Each check's witness in ``report``: the digest of the results a passed check compared exactly ("" else)."""
    return RECORDER.witnesses(report)


@functools.cache
def right_witnesses(check: Any, right: Any) -> dict[str, str]:
    """Each check's witness for the right answer ``right`` on seed 0: worked out once for every wrong version a test
    compares with it."""
    return witnesses(check(right, seed=0))


def witness(outcome: Outcome) -> str:
    """One outcome's witness (see :func:`witnesses`)."""
    return RECORDER.witness(outcome)


def assert_passes_witness_as(report: CheckReport, right: dict[str, str]) -> None:
    """Every check ``report`` passed witnesses what a right answer's did on the same seed (``right``: its
    :func:`witnesses`). The grader verifies a passed check by its witness: a bug one check names must not change
    another check's witness, or it would cost twice."""
    assert all(witness(o) == right[o.key] for o in report.outcomes if o.ok), str(report)


def assert_every_check_shown_to_fail(checks: Iterable[Check], wrong_versions: Iterable[tuple[Any, str]]) -> None:
    """Each check's name must match a (wrong version, failing check) pair a test runs."""
    shown = {name for _, name in wrong_versions}
    for check in checks:
        assert any(part in check.name for part in shown), check.name


def copied(obj: Any) -> Any:
    """``obj`` as a reader who copied its code (rather than calling the package's) would hand it to a check.

    The package keeps its references and baselines from a reader's code (``synclab.answer_keys``): handed
    to a check, they fail by name. A test that shows a check catching a baseline on its merits (its syncs, its
    host work) runs the same code unmarked, as a copy pasted into a lab would be.
    """
    import functools
    import types

    def plain(function: Any) -> Any:
        from synclab.answer_keys import unguarded

        function = unguarded(function)
        twin = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                                  function.__closure__)
        twin.__kwdefaults__, twin.__qualname__ = function.__kwdefaults__, function.__qualname__
        return twin

    if not isinstance(obj, type):
        return plain(obj)
    members = {}
    for klass in obj.__mro__:
        for attr, value in vars(klass).items():
            if attr in members:
                continue
            if isinstance(value, functools.cached_property) and hasattr(value.func, "__answer_key__"):
                members[attr] = functools.cached_property(plain(value.func))
            elif callable(value) and hasattr(value, "__answer_key__"):
                members[attr] = plain(value)
    twin = type(obj.__name__, (obj,), {**members, "__answer_key__": None, "__doc__": f"a copy of {obj.__name__}"})
    for attr, value in members.items():
        if isinstance(value, functools.cached_property):
            value.__set_name__(twin, attr)
    return twin
