# getattr with a plain name, type(self) in a message, an assert, and a plain for-loop running sum (no library cumsum).
class ListCachedRange(PlaceholderRange):
    """``PlaceholderRange`` as PR #40143 left it: the cumsum of ``is_embed`` cached as a Python list."""

    @cached_property
    def embeds_cumsum(self) -> list[int] | None:
        """``cumsum(is_embed)`` as a list of int, computed once (None without a mask)."""
        mask = getattr(self, "is_embed", None)
        if mask is None:
            return None
        running, total = [], 0
        for flag in mask.tolist():
            total += 1 if flag else 0
            running.append(total)
        assert len(running) == self.length, f"{type(self).__name__}: mask of {len(running)} for length {self.length}"
        return running

    def get_num_embeds(self) -> int:
        """How many encoder-output rows this item has: its cost in encoder budget and cache space."""
        cumsum = self.embeds_cumsum
        if cumsum is None:
            return self.length
        if not cumsum:
            return 0
        return cumsum[-1]

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """The half-open range of encoder-output rows whose positions lie in ``[start_idx, end_idx)``."""
        cumsum = self.embeds_cumsum
        if cumsum is None:
            return start_idx, end_idx
        first = 0
        if start_idx:
            first = cumsum[start_idx - 1]
        last = 0
        if end_idx:
            last = cumsum[end_idx - 1]
        return first, last
