# The fixes named as a reviewer says them ("Pinned uploads", "list-cache"), a list for the set, a capital letter.
def my_reading() -> dict:
    """Your answer to each of ch6.READING_QUESTIONS, read off the counts above."""
    history_fix, calls_fix = "Reverse scan", "list-cache"
    return dict(
        removes_most_syncs="Pinned uploads",
        removes_no_syncs=[history_fix, calls_fix],
        cuts_history_reads=history_fix,
        cuts_torch_calls=calls_fix,
        saving_grows_with={"reverse_scan": "output length", "list_cache": "images"},
        one_fix_alone="B",
    )
