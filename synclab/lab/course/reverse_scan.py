"""Chapter 4's exercises and hints (reverse placeholder scans): what its entry in the registry
(:mod:`synclab.lab.chapters`) points to. What each field of an exercise means: :mod:`synclab.lab.exercises`; how
a ladder of hints is shown: :mod:`synclab.lab.hints`.
"""

from __future__ import annotations

from synclab.lab.chapters import Exercise, Hint

EXERCISES: list[Exercise] = [
    Exercise("4.1", "ch4", 14, ("ReverseScanBatch",),
             "ch4.check_update_async_output_token_ids(ReverseScanBatch)"),  # step_outcome
    Exercise("4.2", "ch4", 6, ("host_bottleneck_length",), "ch4.check_bottleneck_model(host_bottleneck_length)",
             stretch=True),  # the payoff's arithmetic (a fitted line's crossing), not the pattern: learners put the
    #      core at 85 to 90 minutes with it
]

HINTS: dict[str, tuple[Hint, Hint]] = {
    "4.1": (
        Hint("which end of the list to look at",
             "The placeholders a step adds are always at the end of the list, and the history before them can be "
             "long. Find the trailing run of `-1`s by walking back from the end; the history's own `-1`s must stay."),
        Hint("what to read and when",
             "Return early when no feature reads the history, and wait for nothing while no list ends with a `-1`: "
             "look at the lists first. Then synchronize on the event once, read `sampled_token_ids_cpu` (a host "
             "tensor) with one `.tolist()`, cut each request's row at its first `-1`, and replace the trailing run "
             "with as many valid ids as fit (slice assignment can shrink the list)."),
    ),
    "4.2": (
        Hint("the model",
             "Fit a straight line `host_us = a + b * length` to all the measured points, then solve "
             "`a + b * L = device_step_us` for `L`."),
        Hint("the edge cases",
             "If the line is already at or above the device step at length 0, the answer is 0. If it never reaches "
             "it within `[0, max_length]` (a flat or falling line included), the answer is `None`."),
    ),
}
