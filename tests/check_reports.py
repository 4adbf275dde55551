"""Helpers for the chapter tests: read a check report, and prove every check can fail."""

from __future__ import annotations

from typing import Any, Iterable

from synclab.checks import Check, CheckReport


def outcome(report: CheckReport, name_part: str) -> str:
    """The status of the one check whose name contains ``name_part``."""
    (match,) = [o for o in report.outcomes if name_part in o.name]
    return match.status


def assert_every_check_shown_to_fail(checks: Iterable[Check], wrong_versions: Iterable[tuple[Any, str]]) -> None:
    """Each check's name must match a (wrong version, failing check) pair a test runs."""
    shown = {name for _, name in wrong_versions}
    for check in checks:
        assert any(part in check.name for part in shown), check.name


def copied(obj: Any) -> Any:
    """``obj`` as a reader who copied its code (rather than calling the package's) would hand it to a check.

    The package keeps its references and baselines from a reader's code (``synclab.lab.answer_keys``): handed
    to a check, they fail by name. A test that shows a check catching a baseline on its merits (its syncs, its
    host work) runs the same code unmarked, as a copy pasted into a lab would be.
    """
    if not isinstance(obj, type):
        return getattr(obj, "__wrapped__", obj)
    plain = {}
    for klass in obj.__mro__:
        for attr, value in vars(klass).items():
            if attr not in plain and hasattr(value, "__answer_key__"):
                plain[attr] = value.__wrapped__
    return type(obj.__name__, (obj,), {**plain, "__answer_key__": None, "__doc__": f"a copy of {obj.__name__}"})
