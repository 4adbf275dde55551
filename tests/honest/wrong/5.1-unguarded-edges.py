# The list cache with vLLM's first draft of the edges: cumsum[-1] on an empty mask, cumsum[end - 1] at end == 0.
# fails: fixed-cases
class ListCachedRange(PlaceholderRange):
    """``PlaceholderRange`` as PR #40143 left it: the cumsum of ``is_embed`` cached as a Python list."""

    @cached_property
    def embeds_cumsum(self) -> list[int] | None:
        """``cumsum(is_embed)`` as a list of int, computed once (None without a mask)."""
        return None if self.is_embed is None else self.is_embed.cumsum(dim=0).tolist()

    def get_num_embeds(self) -> int:
        """How many encoder-output rows this item has: its cost in encoder budget and cache space."""
        return self.length if self.embeds_cumsum is None else self.embeds_cumsum[-1]

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """The half-open range of encoder-output rows whose positions lie in ``[start_idx, end_idx)``."""
        if self.embeds_cumsum is None:
            return start_idx, end_idx
        start = self.embeds_cumsum[start_idx - 1] if start_idx > 0 else 0
        return start, self.embeds_cumsum[end_idx - 1]
