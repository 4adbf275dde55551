# Clamps the end index to 0 instead of guarding it: no [-1] (the review's total), but a range ending at 0 reads
# cumsum[0], 1 when the item's first position is an embedding (a learner's probe passed every fixed case).
# fails: fixed-cases
class ListCachedRange(PlaceholderRange):
    """``PlaceholderRange`` as the chapter's fix left it: the cumsum of ``is_embed`` cached as a Python list."""

    @cached_property
    def embeds_cumsum(self) -> list[int] | None:
        """``cumsum(is_embed)`` as a list of int, computed once (None without a mask)."""
        # One conversion here, so that every question later is a list index:
        # no torch call, no 0-d tensor to build and free.
        return None if self.is_embed is None else self.is_embed.cumsum(dim=0).tolist()

    def get_num_embeds(self) -> int:
        """How many encoder-output rows this item has: its cost in encoder budget and cache space."""
        if self.embeds_cumsum is None:
            return self.length
        return self.embeds_cumsum[-1] if self.embeds_cumsum else 0  # an empty mask has no [-1]

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """The half-open range of encoder-output rows whose positions lie in ``[start_idx, end_idx)``."""
        if self.embeds_cumsum is None:
            return start_idx, end_idx
        if not self.embeds_cumsum:  # an empty mask: nothing to read
            return 0, 0
        # cumsum[i - 1] = embeddings before position i; guard 0, or [-1] would read the total.
        embeds_start_idx = self.embeds_cumsum[start_idx - 1] if start_idx > 0 else 0
        embeds_end_idx = self.embeds_cumsum[max(end_idx - 1, 0)]  # clamped: never [-1], but reads [0] at 0
        return embeds_start_idx, embeds_end_idx