# itertools.accumulate over the mask's ints, and a second cached_property with a leading 0 that spares the edge guards.
from functools import cached_property
from itertools import accumulate


class ListCachedRange(PlaceholderRange):
    """``PlaceholderRange`` as PR #40143 left it: the cumsum of ``is_embed`` cached as a Python list."""

    @cached_property
    def embeds_cumsum(self) -> list[int] | None:
        """``cumsum(is_embed)`` as a list of int, computed once (None without a mask)."""
        if self.is_embed is None:
            return None
        return list(accumulate(map(int, self.is_embed.tolist())))

    @cached_property
    def _before(self) -> list[int]:
        """_before[i]: embeddings before position i (so _before[0] == 0 and _before[-1] is the total)."""
        return [0, *self.embeds_cumsum]

    def get_num_embeds(self) -> int:
        """How many encoder-output rows this item has: its cost in encoder budget and cache space."""
        return self.length if self.is_embed is None else self._before[-1]

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """The half-open range of encoder-output rows whose positions lie in ``[start_idx, end_idx)``."""
        if self.is_embed is None:
            return start_idx, end_idx
        before = self._before
        return before[start_idx], before[end_idx]
