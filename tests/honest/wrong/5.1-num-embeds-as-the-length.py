# Counts the item's embeddings as its mask's length: every placeholder position, not only the True ones.
# fails: fixed-cases
class ListCachedRange(PlaceholderRange):
    """``PlaceholderRange`` as PR #40143 left it: the cumsum of ``is_embed`` cached as a Python list."""

    @cached_property
    def embeds_cumsum(self) -> list[int] | None:
        """``cumsum(is_embed)`` as a list of int, computed once (None without a mask)."""
        return None if self.is_embed is None else self.is_embed.cumsum(dim=0).tolist()

    def get_num_embeds(self) -> int:
        """How many encoder-output rows this item has: its cost in encoder budget and cache space."""
        if self.embeds_cumsum is None:
            return self.length
        return len(self.embeds_cumsum)

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """The half-open range of encoder-output rows whose positions lie in ``[start_idx, end_idx)``."""
        if self.embeds_cumsum is None:
            return start_idx, end_idx
        start = self.embeds_cumsum[start_idx - 1] if start_idx > 0 else 0
        end = self.embeds_cumsum[end_idx - 1] if end_idx > 0 else 0
        return start, end
