"""How a process the checks start (chapter 3's ranks) runs under the grader's audit hook too.

Taught nowhere: the grader's machinery (:mod:`synclab.lab.audit`) answers these events, and a chapter's own
processes ask them. ``sys.audit`` reaches the hook without the chapter importing the lab; where no hook is armed
(a notebook's kernel, the tests of a chapter) nobody answers, and the processes run as they always did.
"""

from __future__ import annotations

import sys
from typing import Callable

EVENT_PREFIX = "synclab.audit."
ASK_FOR_HOOK = EVENT_PREFIX + "hook_for_child"  # args: (a list, to receive a callable that arms the hook)
ASK_FOR_REFUSALS = EVENT_PREFIX + "refusals"  # args: (a list, to receive what this process's hook refused)
REPORT_REFUSAL = EVENT_PREFIX + "refused_in_child"  # args: (a phrase: what a child's hook refused, and where)


def hook_for_child() -> Callable[[], None] | None:
    """A picklable callable that arms this process's audit hook in a child, or None where none is armed."""
    box: list = []
    sys.audit(ASK_FOR_HOOK, box)
    return box[0] if box else None


def refusals_here() -> list[str]:
    """What the audit hook armed in this process has refused so far (empty where none is armed)."""
    box: list = []
    sys.audit(ASK_FOR_REFUSALS, box)
    return list(box)


def report_refusal(why: str) -> None:
    """Record, in this process's hook, an event a child's hook refused: the exercise is flagged as if it were here."""
    sys.audit(REPORT_REFUSAL, why)
