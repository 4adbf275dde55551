# believes every non_blocking copy is free: b (from NumPy memory) and j (into a plain host tensor) predicted as no wait
# fails: predictions
def my_predictions() -> dict[str, Any]:
    """Your prediction for each snippet: a SyncKind, or None when the host does not wait."""
    return {"a": SyncKind.H2D_COPY, "b": None, "c": None, "d": SyncKind.ITEM, "e": None, "f": SyncKind.H2D_COPY,
            "g": None, "h": SyncKind.BOOL_MASK_INDEX, "i": SyncKind.ITEM, "j": None}
