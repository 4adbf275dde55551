# Right answers, but the questions still read a cached tensor (the list is built only because the contract asks).
# fails: no-torch-calls
class ListCachedRange(PlaceholderRange):
    """``PlaceholderRange`` as PR #40143 left it: the cumsum of ``is_embed`` cached as a Python list."""

    @cached_property
    def _cumsum_tensor(self):
        return self.is_embed.cumsum(0)

    @cached_property
    def embeds_cumsum(self) -> list[int] | None:
        """``cumsum(is_embed)`` as a list of int, computed once (None without a mask)."""
        return None if self.is_embed is None else self._cumsum_tensor.tolist()

    def get_num_embeds(self) -> int:
        """How many encoder-output rows this item has: its cost in encoder budget and cache space."""
        if self.is_embed is None:
            return self.length
        return int(self._cumsum_tensor[-1]) if self.length else 0

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        """The half-open range of encoder-output rows whose positions lie in ``[start_idx, end_idx)``."""
        if self.is_embed is None:
            return start_idx, end_idx
        cumsum = self._cumsum_tensor
        start = int(cumsum[start_idx - 1]) if start_idx > 0 else 0
        end = int(cumsum[end_idx - 1]) if end_idx > 0 else 0
        return start, end
