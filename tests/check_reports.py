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
