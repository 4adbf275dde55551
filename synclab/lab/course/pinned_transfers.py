"""Chapter 3's exercises and hints (pinned non_blocking transfers): what its entry in the registry
(:mod:`synclab.lab.chapters`) points to. What each field of an exercise means: :mod:`synclab.lab.exercises`; how
a ladder of hints is shown: :mod:`synclab.lab.hints`.
"""

from __future__ import annotations

from synclab.lab.chapters import Exercise, Hint

EXERCISES: list[Exercise] = [
    Exercise("3.1", "ch3", 4, ("async_tensor_h2d",), "ch3.check_async_tensor_h2d(async_tensor_h2d)"),  # upload_outcome
    Exercise("3.2", "ch3", 6, ("PinnedSampler",),
             "ch3.check_gather_specific_token_logprobs(PinnedSampler)"),  # gather_outcomes
    Exercise("3.3", "ch3", 3, ("PinnedInputsRunner",), "ch3.check_init_model_kwargs(PinnedInputsRunner)",
             stretch=True),  # the pattern of 3.1-3.2 at a third site: the core fits 75 minutes without it
    Exercise("3.4", "ch3", 2, ("PinnedInputsRunner",), "ch3.check_fast_prefill(PinnedInputsRunner)",
             stretch=True),  # 3.3 and 3.4: kwargs_outcomes, prefill_outcomes
    Exercise("3.5", "ch3", 3, ("bincount",), "ch3.check_bincount(bincount)", stretch=True),  # run_bincount
    Exercise("3.6", "ch3", 3, ("my_predictions",), "ch3.check_sync_predictions(my_predictions)",
             stretch=True),  # a self-test of the kinds: learners put the core at 85 minutes with it
    Exercise("3.7", "ch3", 3, ("_run_ar", "_synchronize_dp_ranks"),
             "ch3.check_dp_sync(_run_ar, _synchronize_dp_ranks)", stretch=True),  # rank_replies: the ranks start there
    Exercise("3.8", "ch3", 3, ("update_ngram_gpu_tensors_incremental", "_apply_bad_words_single_batch"),
             "ch3.check_ngram_and_bad_words(update_ngram_gpu_tensors_incremental, _apply_bad_words_single_batch)",
             stretch=True),  # ngram_steps (the truth replayed here), banned_outcome
]

HINTS: dict[str, tuple[Hint, Hint]] = {
    "3.1": (
        Hint("where the data should be before the copy",
             "A `non_blocking` upload is asynchronous only from pinned memory. So build (or copy) the host data "
             "into a pinned tensor first, when the platform has pinned memory, and only then send it."),
        Hint("which calls",
             "One `.to(device, dtype=dtype, non_blocking=True)` at the end; what goes before it depends on the "
             "input:\n\n"
             "- a list: `torch.tensor(data, dtype=dtype, pin_memory=pin)` (`torch.as_tensor` takes no "
             "`pin_memory`, and `torch.tensor` refuses to pin a tensor or an array: the given lines have made an "
             "array a tensor already, so it follows the next cases);\n"
             "- a pageable CPU tensor: a pinned copy made by this call (sent from pageable memory the upload would "
             "be a staging copy, and the caller may change theirs once the call returns); convert its dtype in the "
             "upload itself or before pinning, never after (that makes a new, pageable tensor);\n"
             "- a tensor already pinned, without gaps: as it is (`pin_memory()` returns it unchanged);\n"
             "- a view with gaps (`t[:, :n]` of a wider `t`), pinned or not: a contiguous copy, pinned (pinning "
             "keeps the gaps, and torch uploads such a view through a pageable temporary; a transposed tensor has "
             "none)."),
    ),
    "3.2": (
        Hint("where to build the id matrix",
             "The ids arrive as Python lists, so fill the padded `[batch, max_ids + 1]` matrix and its mask on the "
             "host, in pinned memory, and upload each once. Column 0, the sampled token, lives on the device: "
             "write it there, never read it back."),
        Hint("which operations",
             "`torch.zeros(..., pin_memory=self.pin_memory)` for the host buffers; one `non_blocking` `.to(device)` "
             "each; `ids[:, 0] = sampled` on the device, after the upload. Use fresh buffers per call: a buffer "
             "refilled while its upload is queued sends the wrong data."),
    ),
    "3.3": (
        Hint("where the lengths should come from",
             "Every length you need is on the host already, in `self.optimistic_seq_lens_cpu`. Reading "
             "`self.seq_lens` (a device tensor) one element at a time is one sync per request."),
        Hint("which operations",
             "Build each request's ids on the host (zeros up to the boundary, ones after it), `torch.cat` them into "
             "one pinned buffer (`out=`), and upload it once, `non_blocking`. Return `{}` early when there is "
             "nothing to pass."),
    ),
    "3.4": (
        Hint("which value the padding needs",
             "The padding is the last index, which lives on the device. You never need it on the host: let a "
             "kernel copy it on the device."),
        Hint("which operations",
             "Copy `logits_indices` into the buffer's start; assign the rest from `logits_indices`' last element "
             "kept as a 0-d device tensor (no `.item()`), so the fill runs on the device. `n` is a shape, a host "
             "number: check `n == 0` first, loudly."),
    ),
    "3.5": (
        Hint("zeroing without a host value",
             "`x[idx] = 0` copies a host `0` to the device, blocking; `x[idx].zero_()` zeroes a gathered copy. Look "
             "for an in-place op that takes the index on the device and the value as a kernel argument."),
        Hint("counting in one pass",
             "View each table as one flat vector. For every (request, position) compute the flat index "
             "`slot * vocab + token`, mask out the positions outside each request's range and the ids outside "
             "`[0, vocab_size)`, then one `scatter_add_` counts the outputs and one scatter that keeps a flag, not "
             "a sum (`scatter_reduce_` with `amax`), marks the prompt."),
    ),
    "3.6": (
        Hint("ask what the host needs",
             "For each line: does the host need a value from the device (then it waits for everything queued "
             "before), a result whose size depends on device data, or a copy into or out of host memory?"),
        Hint("the copies",
             "A `non_blocking` copy's cost depends on the host memory: pinned memory lets the host go on, pageable "
             "memory means a staging copy on the way up and a wait on the way down."),
    ),
    "3.7": (
        Hint("where the table should be filled",
             "The four numbers are host values. Fill this rank's column on the host, upload the table once, and let "
             "the all-reduce run on the device."),
        Hint("which operations",
             "A host `torch.zeros` of shape `[4, dp_size]` (pinned only when the device is not the host), the "
             "column written with plain indexing, one `non_blocking` upload, `dist.all_reduce`; in "
             "`_synchronize_dp_ranks`, one `.cpu()` of the whole table, and every reader after it on host memory."),
    ),
    "3.8": (
        Hint("where each index list should live",
             "The reorder lists (previous rows, current rows) and the new lengths are Python values on the host: "
             "upload each list once from its own pinned buffer; the tokens themselves stay on the device."),
        Hint("which operations",
             "Gather the moved rows by indexing with the uploaded lists and `.clone()` them before you write them back, "
             "so that a row moved onto another's place is not read after it was overwritten. For bad words the "
             "past tokens are a host list already; ban a token through a one-element slice, whose value becomes "
             "a fill argument, not through `logits[t] = v`, which copies a 0-d value over from the host."),
    ),
}
