# Reads "one sync fix alone buys little" as a fix that adds back the syncs it removes (reason d); the counts show
# every fix alone at or under the baseline's stray syncs.
# fails: answers
def my_reading() -> dict:
    """Your answer to each of ch6.READING_QUESTIONS, read off the counts above."""
    return {
        "removes_most_syncs": "pinned_uploads",
        "removes_no_syncs": {"reverse_scan", "list_cache"},
        "cuts_history_reads": "reverse_scan",
        "cuts_torch_calls": "list_cache",
        "saving_grows_with": {"reverse_scan": "output length", "list_cache": "images"},
        "one_fix_alone": "d",
    }
