"""Stored answers: what the students' install holds in place of the answers it does not ship.

Used by the checks of the exercises, all judged apart (:mod:`synclab.lab.judged_apart`), in a students' install
only. There, each answer those checks compare with
(``_bottleneck_reference``, a prediction measurer, an answer key) is not shipped: its body is one call of
:func:`stored_answer`, which returns the result stored for the same arguments in ``data/expected/<task>.json``.
Those files hold the answers of the **public** cases alone: the fixed cases, and the random cases of a few seeds
(:func:`public_seeds`), which a learner's check in the install draws from. ``python -m synclab expected`` writes
them from the real answers, and a test writes them again and compares. The grader's own cases are drawn from its own
seed, and its answers' process holds no such file.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from synclab.answer_keys.plain_data import decode, digest

# The tasks whose answers this install does not ship. Empty in the repository; the students' install says which.
NOT_SHIPPED: frozenset[str] = frozenset()
EXPECTED_DIR = Path(__file__).resolve().parents[2] / "data" / "expected"


class AnswerNotStored(RuntimeError):
    """A case whose answer this install neither ships nor stores (a seed of one's own, where the answers are not
    shipped)."""


@lru_cache(maxsize=None)
def _table(task: str) -> dict[str, Any]:
    path = EXPECTED_DIR / f"{task}.json"
    if not path.exists():
        return {"seeds": [], "answers": {}}
    return json.loads(path.read_text())


def stored_answer(task: str, name: str, arguments: dict[str, Any]) -> Any:
    """The stored result of ``name`` (``module:function``) called with ``arguments``, for Exercise ``task``."""
    table = _table(task)
    found = table["answers"].get(name, {}).get(digest(arguments))
    if found is None:
        seeds = ", ".join(map(str, table["seeds"])) or "none"
        raise AnswerNotStored(f"NotShipped: {name.split(':')[-1]}, the checks' answer for Exercise {task}, is not in "
                              f"this install, and this case is not among its stored public cases (run the check "
                              f"with seed=None, or one of the stored seeds: {seeds})")
    return decode(found)


def public_seeds(task: str) -> list[int] | None:
    """The seeds whose random cases a learner's check draws from, where this install stores its answers instead of
    shipping them; None where it ships them (any seed will do)."""
    return (list(_table(task)["seeds"]) or None) if task in NOT_SHIPPED else None
