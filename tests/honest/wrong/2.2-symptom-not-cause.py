# Names runner C by a symptom (its device tensors are gone before get_output) instead of the cause.
# fails: diagnosis
def my_diagnosis() -> dict[str, str]:
    """Your label (a key of ch2.BUG_LABELS) for each runner, A to F."""
    return {"A": "unordered", "B": "pageable", "C": "freed early", "D": "freed early", "E": "over-wait", "F": "early read"}
