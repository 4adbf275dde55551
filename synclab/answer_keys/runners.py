"""Runners: the one way a check reaches an answer that is not a function of data, wherever the answer lives.

Used by the checks of the exercises judged apart whose answer is code the checks run (0.1's step, 1.1's and 1.2's
pooler, 2.1's runner, 3.1's upload, 3.2's sampler, 3.3's and 3.4's runner, 3.5's bincount, 3.7's ranks, 3.8's update and ban, 4.1's batch,
5.1's range, 5.2's scheduler; introduced with chapter 4's checks). A runner is a function of the chapter's (in its
``workloads`` room, or beside the checks that use it) that takes the reader's answer and plain data, builds the case, runs the
answer on it, and returns what the check compares, as plain data
(:mod:`synclab.answer_keys.plain_data`). In a notebook the answer is the reader's own code and the runner runs here. In
the grader the check is handed a stand-in for an answer held in another process (anything but a class that offers
``run_there``, :class:`synclab.lab.judged_apart.RemoteFunction`): the runner then runs there, on the real answer, and
only its result comes back. So a check's code is the same on both paths, and what the grader keeps (the references,
the expected results, the verdict) never meets the answer.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

R = TypeVar("R")


def runs_with_the_answer(runner: Callable[..., R]) -> Callable[..., R]:
    """Mark ``runner(answer, *data)`` as a runner: called with an answer held elsewhere, it runs where the answer is.

    Its arguments after the answer and its result must be plain data; its keyword arguments are sent by position."""
    signature = inspect.signature(runner)
    name = f"{runner.__module__}:{runner.__qualname__}"

    @functools.wraps(runner)
    def run(answer: Any, *args: Any, **kwargs: Any) -> R:
        there = getattr(answer, "run_there", None)
        if isinstance(answer, type) or not callable(there):
            return runner(answer, *args, **kwargs)
        bound = signature.bind(answer, *args, **kwargs)
        bound.apply_defaults()
        return there(name, *list(bound.arguments.values())[1:])

    return run
