# Full snippet names from primer.SNIPPETS, a comprehension, and an lru_cache'd table of the syncing snippets.
import functools


@functools.lru_cache(maxsize=None)
def _syncs_by_letter() -> tuple[tuple[str, int], ...]:
    reads = {"b": 2}  # two tensor bounds, each read back on its own
    reads.update({letter: 1 for letter in "degh"})  # .item(), a mask's size, .tolist(), an `if`
    return tuple(sorted(reads.items()))


def my_predictions() -> dict[str, int]:
    """Your predicted number of syncs for each snippet, keyed by the snippet's name."""
    syncing = dict(_syncs_by_letter())
    return {name: syncing.get(name.split(":")[0], 0) for name in primer.SNIPPETS}
