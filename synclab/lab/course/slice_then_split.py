"""Chapter 1's exercises and hints (slice-then-split): what its entry in the registry
(:mod:`synclab.lab.chapters`) points to. What each field of an exercise means: :mod:`synclab.lab.exercises`; how
a ladder of hints is shown: :mod:`synclab.lab.hints`.
"""

from __future__ import annotations

from synclab.lab.chapters import Exercise, Hint

EXERCISES: list[Exercise] = [
    Exercise("1.1", "ch1", 20, ("AllPool",), "ch1.check_all_pool(AllPool)"),  # pooling_outcomes, ...
    Exercise("1.2", "ch1", 5, ("AllPoolNoSync",), "ch1.check_all_pool_no_sync(AllPoolNoSync)", stretch=True,
             builds_on=("1.1",), stand_in=(("AllPool", "synclab.capstone.chapter_fixes:_AllPoolReference"),)),
    #      with 1.1 failed, its answer's process is sent the package's 1.1 as source
]

HINTS: dict[str, tuple[Hint, Hint]] = {
    "1.1": (
        Hint("which device values you really need",
             "The requests' rows are contiguous, and the host already knows each request's size "
             "(`num_scheduled_tokens_cpu`). The only thing it cannot know is where this sub-group starts and ends "
             "in the whole batch: two numbers, at the two ends of the index tensors."),
        Hint("which operations",
             "Read where the first request's rows start and where the last request's rows end: the first entry "
             "of `first_token_indices_gpu` and the last of `last_token_indices_gpu` (two `.item()` calls on the "
             "index tensors, not on the data), slice the sub-group once, then `torch.split` it by the host sizes: "
             "views, one call. Chunked prefill keeps the baseline's loop over those views, with one change: every "
             "chunk goes through `ch1.kept_chunk`, whose table in the lab says when it clones."),
    ),
    "1.2": (
        Hint("what the caller now guarantees",
             "The dispatcher hands you exactly this sub-group's rows, so you no longer need to find where they "
             "start: the sizes on the host are the whole story."),
        Hint("which operations",
             "`torch.split` by `num_scheduled_tokens_cpu.tolist()` (a host tensor: no sync). Before it, compare "
             "`hidden_states.shape[0]` with the sizes' sum and raise `ValueError` when they differ: shapes are host "
             "metadata, so the check is free."),
    ),
}
