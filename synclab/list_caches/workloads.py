"""Chapter 5: what the chapter runs: the inputs, the batches and steps, the runs the checks and the profiles share.

A room of :mod:`synclab.list_caches` (its docstring tells the chapter).
"""

from __future__ import annotations

import random

import torch

from synclab.engine.mm_inputs import PlaceholderRange
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
