"""Every check has a stable id (synclab.checks.Check.id): what it is, apart from its wording.

A check's name is its display text, reworded as the lab improves; its id (``"fixed-cases"``, keyed ``"4.1/fixed-cases"``)
is what a dependency (``after``), the grader's witnesses and the JSON report name it by. Every check of every chapter
has one, unique within its task, and every ``after`` names a check of the same task declared before it. Each rule is
shown to fail on planted checks.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from synclab.checks import Check, run_checks
from synclab.lab.chapters import REGISTRY

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def declared_checks() -> list[list[Check]]:
    """Every list of checks a chapter's checks room declares at module level (one list per exercise, or per part)."""
    lists: dict[int, list[Check]] = {}
    for chapter in REGISTRY:
        room = importlib.import_module(f"{chapter.package}.checks")
        modules = [room] + [importlib.import_module(f"{room.__name__}.{m.name}")
                            for m in pkgutil.iter_modules(getattr(room, "__path__", []))]
        for module in modules:
            for value in vars(module).values():
                if isinstance(value, list) and value and all(isinstance(c, Check) for c in value):
                    lists[id(value)] = value
    return list(lists.values())


def id_problems(lists: list[list[Check]]) -> list[str]:
    out = []
    seen: dict[str, str] = {}
    for checks in lists:
        for n, check in enumerate(checks):
            if not check.id:
                out.append(f"[{check.task}] {check.name!r} has no id")
            elif seen.setdefault(check.key, check.name) != check.name:
                out.append(f"{check.key} names two checks: {seen[check.key]!r} and {check.name!r}")
            earlier = {c.id for c in checks[:n] if c.task == check.task}
            if check.after and check.after not in earlier:
                out.append(f"{check.key}: after={check.after!r} is no earlier check of its task")
    return out


def test_every_check_has_an_id_unique_in_its_task_and_every_after_names_an_earlier_one():
    lists = declared_checks()
    checks = [c for checks in lists for c in checks]
    assert len(checks) >= 98 and {c.task.split(".")[0] for c in checks} == {str(c.number) for c in REGISTRY}
    found = id_problems(lists)
    assert not found, "\n".join(found)


def test_planted_checks_without_ids_twice_named_or_after_a_later_one_are_named():
    def run(impl, rng):
        pass

    planted = [[Check("9.9", "one", run, id="same"), Check("9.9", "two", run, id="same", after="later"),
                Check("9.9", "three", run), Check("9.9", "four", run, id="later")]]
    found = "\n".join(id_problems(planted))
    assert "9.9/same names two checks: 'one' and 'two'" in found
    assert "9.9/same: after='later' is no earlier check of its task" in found and "'three' has no id" in found
    with pytest.raises(ValueError, match="lower-case words joined by '-'"):
        Check("9.9", "bad", run, id="Fixed cases")


def test_a_dependency_names_its_check_by_id_and_survives_a_reworded_name():
    """``after`` keys on the id: the dependent check waits for the one it names, whatever that one's name says."""
    def fails(impl, rng):
        raise AssertionError("no")

    def passes(impl, rng):
        pass

    for name in ("values", "the values, reworded"):
        checks = [Check("9.9", name, fails, id="values"), Check("9.9", "in place", passes, id="in-place",
                                                                   after="values")]
        first, second = run_checks("t", checks, lambda: None, seed=0).outcomes
        assert second.status == "skipped" and f'counts once "{name}" passes' in second.message
        assert (first.key, second.key) == ("9.9/values", "9.9/in-place")


def test_a_seed_draws_the_same_cases_whatever_the_checks_name_says():
    """A check's random cases follow its key (``9.9/random-cases``), not its wording: a reworded name replays the
    same cases on the same seed (the stored public cases' answers, data/expected/, stay right); another id draws
    others."""
    drawn: list[list[int]] = []

    def draws(impl, rng):
        drawn.append([rng.randrange(10**6) for _ in range(3)])

    for name, check_id in (("random cases", "random-cases"), ("random cases, reworded", "random-cases"),
                           ("random cases", "other-cases")):
        run_checks("t", [Check("9.9", name, draws, id=check_id)], lambda: None, seed=7)
    assert drawn[0] == drawn[1] != drawn[2]
