# Mixes up which fix saves what: the list cache is thought to cut history reads, the reverse scan torch calls.
# fails: answers
def my_reading() -> dict:
    """Your answer to each of ch6.READING_QUESTIONS, read off the counts above."""
    return {
        "removes_most_syncs": "pinned_uploads",
        "removes_no_syncs": {"reverse_scan", "list_cache"},
        "cuts_history_reads": "list_cache",
        "cuts_torch_calls": "reverse_scan",
        "saving_grows_with": {"reverse_scan": "images", "list_cache": "output length"},
        "one_fix_alone": "b",
    }
