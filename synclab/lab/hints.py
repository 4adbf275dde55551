"""Hints in steps, one ladder per exercise: what to think about first, then which operations, then the answer.

Used by every chapter. A page shows an exercise's ladder with ``{hints} N.M`` (``book/_ext/hints.py``),
whose body is the ladder's last rung, vLLM's code after the PR; the lab generator
(:mod:`synclab.lab.labgen`) puts the first two rungs under the exercise's heading in the lab, where the
answer is the reader's own. A hint never holds code that can be pasted as the answer: it names where the
data should live and which operations fit, and leaves the writing to the reader.

Written once, in each chapter's module of :mod:`synclab.lab.course`, so that a page and its lab cannot give
different hints.
"""

from __future__ import annotations

from synclab.lab.chapters import REGISTRY, Hint


# Each chapter's ladders from its module in synclab/lab/course/ (its registry entry's), in the registry's order.
HINTS: dict[str, tuple[Hint, Hint]] = {task: pair for chapter in REGISTRY for task, pair in chapter.hints.items()}


def ladder(task: str) -> tuple[Hint, Hint]:
    """The two hints of one exercise, first the gentler one."""
    try:
        return HINTS[task]
    except KeyError:
        raise KeyError(f"no hints for Exercise {task}: add them to its chapter's module in synclab/lab/course/") \
            from None


def lab_markdown(task: str) -> str:
    """The hints as a lab's markdown cell: two folds, to open one at a time."""
    parts = [f"**Stuck on {task}?** Open one hint at a time; try again after each."]
    for number, hint in enumerate(ladder(task), 1):
        parts.append(f"<details><summary>Hint {number}: {hint.title}</summary>\n\n{hint.text}\n\n</details>")
    return "\n\n".join(parts)
