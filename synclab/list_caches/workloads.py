"""Chapter 5: what the chapter runs: the inputs, the batches and steps, the runs the checks and the profiles share.

A room of :mod:`synclab.list_caches` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
from typing import Any

import torch

from synclab.answer_keys.runners import runs_with_the_answer
from synclab.checks import CheckFailed
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


def running_counts(pattern: str | None, length: int) -> list[int]:
    """``counts[i]``: the embeddings among an item's first ``i`` positions (``length + 1`` of them, from 0)."""
    counts = [0]
    for i in range(length):
        counts.append(counts[-1] + (pattern is None or pattern[i] == "T"))
    return counts


class GivenCountsRange(PlaceholderRange):
    """An item whose questions are answered from running counts handed to it as data (:func:`running_counts`).

    Exercise 5.2's collaborator: the scheduler's checks build their requests of these, with the counts worked out by
    whoever built the case, so that they run wherever the scheduler runs, the grader's answer process included, where
    no answer of 5.1 is shipped. Its questions make no torch call, and it holds its caller to vLLM's contract: a
    window not clamped to the item fails the check that made it (vLLM's list raises IndexError past the end and
    reads from the back on a negative index).
    """

    def __init__(self, offset: int, length: int, is_embed: torch.Tensor | None, counts: list[int]) -> None:
        super().__init__(offset, length, is_embed)
        object.__setattr__(self, "counts", counts)  # the dataclass is frozen

    def get_num_embeds(self) -> int:
        return self.counts[-1]

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        if not (isinstance(start_idx, int) and isinstance(end_idx, int) and 0 <= start_idx <= end_idx <= self.length):
            raise CheckFailed(
                f"get_embeds_indices_in_range({start_idx!r}, {end_idx!r}) asked of an item of length {self.length}",
                expected=f"Python ints with 0 <= start_idx <= end_idx <= {self.length} (positions inside the item)",
                got=f"({start_idx!r}, {end_idx!r})",
                hint="clamp the window to the item before asking: start_idx = max(num_computed_tokens - "
                     "offset, 0), end_idx = min(num_computed_tokens + num_new_tokens - offset, length); vLLM's "
                     "list cumsum raises IndexError past the end and reads from the back on a negative index")
        return self.counts[start_idx], self.counts[end_idx]


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
