# numpy's cumsum of the mask, turned into Python ints once with .tolist(); a lambda alias and conditional expressions.
import numpy as np

_running_count = lambda mask: np.cumsum(mask.numpy(), dtype=np.int64).tolist()


class ListCachedRange(PlaceholderRange):
    """``PlaceholderRange`` as PR #40143 left it: the cumsum of ``is_embed`` cached as a Python list."""

    @cached_property
    def embeds_cumsum(self) -> list[int] | None:
        """``cumsum(is_embed)`` as a list of int, computed once (None without a mask)."""
        return _running_count(self.is_embed) if self.is_embed is not None else None

    def get_num_embeds(self) -> int:
        """How many encoder-output rows this item has: its cost in encoder budget and cache space."""
        counts = self.embeds_cumsum
        if counts is None:
            return self.length
        return counts[len(counts) - 1] if len(counts) > 0 else 0

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """The half-open range of encoder-output rows whose positions lie in ``[start_idx, end_idx)``."""
        counts = self.embeds_cumsum
        if counts is None:
            return (start_idx, end_idx)
        below = lambda i: counts[i - 1] if i > 0 else 0
        return (below(start_idx), below(end_idx))
