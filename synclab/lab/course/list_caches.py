"""Chapter 5's exercises and hints (list-based caches): what its entry in the registry
(:mod:`synclab.lab.chapters`) points to. What each field of an exercise means: :mod:`synclab.lab.exercises`; how
a ladder of hints is shown: :mod:`synclab.lab.hints`.
"""

from __future__ import annotations

from synclab.lab.chapters import Exercise, Hint

EXERCISES: list[Exercise] = [
    Exercise("5.1", "ch5", 10, ("ListCachedRange",), "ch5.check_placeholder_range(ListCachedRange)"),  # range_answers
    Exercise("5.2", "ch5", 5, ("EncoderScheduler",), "ch5.check_encoder_scheduler(EncoderScheduler)",
             stretch=True),  # scheduled_call, mix_steps. The loop around 5.1's question: its eight rules are the
    #      scheduler's policy, not the pattern, and learners put the core at 110 minutes with it
]

HINTS: dict[str, tuple[Hint, Hint]] = {
    "5.1": (
        Hint("when to convert",
             "The running count is needed again and again, so convert it to a Python list once, in the cached "
             "property, and answer every question from the list."),
        Hint("which operations",
             "`is_embed.cumsum(0).tolist()` once; `get_num_embeds()` is the list's last element (0 when it is "
             "empty); a range is the pair (the count before `start`, the count before `end`), the count before `i` "
             "being `cumsum[i - 1]`, and 0 at `i == 0`. Guard both ends: `cumsum[-1]` is the total, not an error."),
    ),
    "5.2": (
        Hint("walk the items in order",
             "Items sit in the token sequence in order. For each one decide: is it past the window (stop)? already "
             "computed, scheduled this step or in the encoder cache (skip)? Otherwise it must be encoded now, if "
             "the budget and the cache can take it; if they cannot, the window ends just before it."),
        Hint("the numbers involved",
             "An item covers `[pos.offset, pos.offset + pos.length)`; it costs `pos.get_num_embeds()` embeddings of "
             "budget and cache space. Shortening the window means `num_new_tokens = pos.offset - "
             "num_computed_tokens`. The contract's table is the order: the disabled-chunking stop (e) comes after "
             "the skips and before the fit."),
    ),
}
