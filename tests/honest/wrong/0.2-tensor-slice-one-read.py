# Thinks a slice with two device bounds reads both back at once (one sync), and that index_fill_ reads its index.
# fails: predictions
def my_predictions() -> dict[str, int]:
    """Your predicted number of syncs for each snippet, keyed by the snippet's name."""
    return {"a": 0, "b": 1, "c": 0, "d": 1, "e": 1, "f": 1, "g": 1, "h": 1}
