"""Chapter {{n}}'s exercises and hints ({{title}}): what its entry in the registry
(:mod:`synclab.lab.chapters`) points to. What each field of an exercise means: :mod:`synclab.lab.exercises`; how
a ladder of hints is shown: :mod:`synclab.lab.hints`.
"""

from __future__ import annotations

from synclab.lab.chapters import Exercise, Hint

EXERCISES: list[Exercise] = [
    Exercise("{{n}}.1", "{{key}}", 10, ("sum_on_device",), "{{key}}.check_sum_on_device(sum_on_device)"),  # sum_outcome
]

HINTS: dict[str, tuple[Hint, Hint]] = {
    "{{n}}.1": (
        Hint("where the sum should live",
             "The values are on the device and so is the answer: nothing in between needs the host to see a number."),
        Hint("which operations",
             "A reduction over the tensor gives a 0-d tensor on the device; return it as it is, without turning it "
             "into a Python number first."),
    ),
}
