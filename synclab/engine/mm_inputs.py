"""Where a multimodal item's embeddings go in the prompt: vLLM's ``PlaceholderRange``.

Taught in chapter 5 (list-based caches). Names follow ``vllm/multimodal/inputs.py``.
An image (or audio clip) becomes ``length`` placeholder tokens starting at prompt
position ``offset``. Not every one of them receives an encoder embedding: the
optional boolean mask ``is_embed`` marks those that do; the others are text or
special tokens inside the span (image start/end, row breaks). So there are two
sizes:

* ``length``: the span in the decoder's sequence (tokens the scheduler counts);
* ``get_num_embeds()``: rows of encoder output, which is also what the item
  costs in encoder budget and encoder-cache space.

The scheduler asks both questions of every item of every request, every step,
through a cumulative sum of the mask cached on the instance:

* :class:`PlaceholderRange` — the data and the interface; the reader's
  Exercise 5.1 subclass fills in the three queries;
* :class:`PlaceholderRangeBaseline` — the code before PR #40143: the cumsum
  cached as a CPU tensor, so every query indexes a tensor and converts with
  ``int()``;
* :class:`MultiModalFeatureSpec` — one item of a request: its identifier (a
  content hash: the same image in two requests has the same one) and its range.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch

from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


@dataclass(frozen=True)
class PlaceholderRange:
    """Positions ``[offset, offset + length)`` of the prompt hold one multimodal item.

    ``is_embed`` ([length] bool, host memory) marks the positions that receive an
    encoder embedding; ``None`` means all of them do. Ranges given to the queries
    are relative to ``offset`` and half-open: ``0 <= start_idx <= end_idx <= length``.
    """

    offset: int
    length: int
    is_embed: torch.Tensor | None = None  # [length] bool, on the host

    def __eq__(self, other: object) -> bool:
        # A tensor does not compare to a bool, so the dataclass's generated __eq__ would raise.
        if not isinstance(other, PlaceholderRange):
            return NotImplemented
        if (self.offset, self.length) != (other.offset, other.length):
            return False
        if self.is_embed is None or other.is_embed is None:
            return self.is_embed is None and other.is_embed is None
        return torch.equal(self.is_embed, other.is_embed)

    __hash__ = object.__hash__  # by identity: frozen, but the mask is a tensor

    @cached_property
    def embeds_cumsum(self) -> Any:
        """The running count of embeddings, ``cumsum(is_embed)``, computed once; ``None`` without a mask."""
        raise NotImplementedError("Exercise 5.1: cache the cumsum of is_embed")

    def get_num_embeds(self) -> int:
        """How many encoder-output rows this item has (its encoder budget and cache size)."""
        raise NotImplementedError("Exercise 5.1: get_num_embeds")

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """The half-open range of encoder-output rows whose positions lie in ``[start_idx, end_idx)``."""
        raise NotImplementedError("Exercise 5.1: get_embeds_indices_in_range")


class PlaceholderRangeBaseline(PlaceholderRange):
    """Before PR #40143: the cumsum cached as a CPU tensor.

    Every query builds a 0-d tensor by indexing (``aten::select``), converts it with
    ``int()`` (``aten::item``) and frees it: a trip through torch's dispatcher for
    one integer. Its two edge cases are as they were: ``[-1]`` on an empty mask
    raises, and ``end_idx == 0`` reads index ``-1``, the total.
    """

    @cached_property
    @answer_key("5.1", role="vLLM's code before #40143", scope="checks", name="PlaceholderRangeBaseline.embeds_cumsum")
    def embeds_cumsum(self) -> torch.Tensor | None:
        return None if self.is_embed is None else self.is_embed.cumsum(dim=0)  # [length] int64

    @answer_key("5.1", role="vLLM's code before #40143", scope="checks", name="PlaceholderRangeBaseline.get_num_embeds")
    def get_num_embeds(self) -> int:
        if self.embeds_cumsum is None:
            return self.length
        return int(self.embeds_cumsum[-1])

    @answer_key("5.1", role="vLLM's code before #40143", scope="checks", name="PlaceholderRangeBaseline.get_embeds_indices_in_range")
    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        if self.embeds_cumsum is None:
            return start_idx, end_idx
        embeds_start_idx = int(self.embeds_cumsum[start_idx - 1]) if start_idx > 0 else 0
        embeds_end_idx = int(self.embeds_cumsum[end_idx - 1])
        return embeds_start_idx, embeds_end_idx


@dataclass
class MultiModalFeatureSpec:
    """One multimodal item of a request."""

    identifier: str  # content hash: equal for the same image in two requests (the encoder cache's key)
    mm_position: PlaceholderRange
    modality: str = "image"


def make_mask(pattern: str) -> torch.Tensor:
    """``"FTFTT"`` -> ``tensor([False, True, False, True, True])``: masks written the way the tests read."""
    return torch.tensor([c == "T" for c in pattern], dtype=torch.bool)
