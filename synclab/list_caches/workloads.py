"""Chapter 5: what the chapter runs: the inputs, the batches and steps, the runs the checks and the profiles share.

A room of :mod:`synclab.list_caches` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
from typing import Any

import torch

from synclab.answer_keys.runners import runs_with_the_answer
from synclab.engine.mm_inputs import PlaceholderRange, make_mask
from synclab.engine.scheduler import Scheduler


RangeClass = type[PlaceholderRange]
SchedulerClass = type[Scheduler]


# ----------------------------------------------------------------------------- masks and ranges


def image_mask(rng: random.Random, length: int) -> torch.Tensor | None:
    """A mask of one of the shapes real processors produce (or None: every position is an embedding)."""
    kind = rng.choice(["none", "all", "framed", "rows", "random", "random", "no embeds"])
    if kind == "none":
        return None
    if kind == "all":
        bits = [True] * length
    elif kind == "framed":  # <start_of_image> soft tokens... <end_of_image>
        bits = [c == "T" for c in framed(length)]
    elif kind == "rows":  # rows of patches, each followed by a row-break token
        width = rng.randint(1, 8)
        bits = [(i + 1) % (width + 1) != 0 for i in range(length)]
    elif kind == "random":
        bits = [rng.random() < 0.7 for _ in range(length)]
    else:
        bits = [False] * length
    return torch.tensor(bits, dtype=torch.bool)


def framed(length: int) -> str:
    """The mask pattern of an image framed by a start and an end token: ``"FTT...TF"``."""
    return "F" + "T" * (length - 2) + "F" if length >= 2 else "F" * length


def pattern_of(mask: torch.Tensor | None) -> str | None:
    """A mask as its pattern, ``"T"`` or ``"F"`` per position (None: no mask): how a case crosses as data."""
    return None if mask is None else "".join("T" if b else "F" for b in mask.tolist())


@runs_with_the_answer
def range_answers(range_cls: RangeClass, pattern: str | None, length: int, offset: int, queries: list[Any]
                  ) -> list[Any]:
    """One item of ``range_cls`` (mask ``pattern``, None: every position an embedding) asked each of ``queries`` in
    turn: ``"num"`` for ``get_num_embeds()``, ``(start, end)`` for ``get_embeds_indices_in_range``. The answers as
    they are. A runner (:mod:`synclab.answer_keys.runners`): Exercise 5.1's checks reach the reader's class by it."""
    item = range_cls(offset=offset, length=length, is_embed=None if pattern is None else make_mask(pattern))
    return [item.get_num_embeds() if query == "num" else item.get_embeds_indices_in_range(*query)
            for query in queries]


@runs_with_the_answer
def cumsum_of(range_cls: RangeClass, pattern: str | None, length: int) -> dict[str, Any]:
    """An item's ``embeds_cumsum`` as it is, and whether a second read gives the same object (a runner)."""
    item = range_cls(offset=7, length=length, is_embed=None if pattern is None else make_mask(pattern))
    first = item.embeds_cumsum
    return {"value": first, "cached": item.embeds_cumsum is first}
