# dict() with keyword arguments for the free snippets, merged (heapq.merge) with the ones that sync; a print.
import heapq
from collections import Counter

FREE = dict(a=0, c=0, f=0)


def my_predictions() -> dict[str, int]:
    """Your predicted number of syncs for each snippet, keyed by the snippet's name."""
    waits = Counter("bdeghb")  # one letter per read back: b has two
    merged = heapq.merge(sorted(FREE.items()), sorted(waits.items()))
    predictions = {letter: int(n) for letter, n in merged}
    print("predicted total:", sum(predictions.values()))
    return predictions
