"""Chapter 0's exercises and hints (the primer): what its entry in the registry
(:mod:`synclab.lab.chapters`) points to. What each field of an exercise means: :mod:`synclab.lab.exercises`; how
a ladder of hints is shown: :mod:`synclab.lab.hints`.
"""

from __future__ import annotations

from synclab.lab.chapters import Exercise, Hint

EXERCISES: list[Exercise] = [
    Exercise("0.1", "ch0", 14, ("decode_step",), "primer.check_decode_step(decode_step)"),  # step_outcome, ...
    Exercise("0.2", "ch0", 6, ("my_predictions",), "primer.check_predictions(my_predictions)"),
]

HINTS: dict[str, tuple[Hint, Hint]] = {
    "0.1": (
        Hint("where the questions should be answered",
             "Every question the baseline asks per request (which token? is it EOS? is the request too long?) can be "
             "answered on the device for the whole batch at once, and the length check needs no device at all: "
             "`seq_lens_cpu` is the host's copy. Compute everything first, then bring it back in **one** read."),
        Hint("which operations",
             "`argmax` over the last dimension gives every next token, `[num_reqs]`; `torch.isnan(logits).any()` "
             "is one device boolean for the whole batch (0-d). Put them in one small tensor (`torch.cat` of the "
             "tokens and the flag made 1-element with `.reshape(1)`, both as integers) and call `.tolist()` once; "
             "raise on NaN before you touch `output_token_ids` or the lengths."),
    ),
    "0.2": (
        Hint("what makes the host wait",
             "The host waits only when it needs a value the device computes: a Python number, a Python `bool`, or "
             "a size that depends on the data. An operation whose arguments are all known to the host just queues "
             "a kernel."),
        Hint("the cases that surprise",
             "Each slice bound that is a device tensor is read back, one at a time; `split` with host sizes is not a read; `x[mask]` "
             "must know how many entries it keeps; `if` on a tensor asks for its truth; `index_fill_` takes its "
             "index on the device and its value as an argument."),
    ),
}
