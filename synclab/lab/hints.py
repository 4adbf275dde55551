"""Hints in steps, one ladder per exercise: what to think about first, then which operations, then the answer.

Used by every chapter. A page shows an exercise's ladder with ``{hints} N.M`` (``book/_ext/hints.py``),
whose body is the ladder's last rung, vLLM's code after the PR; the lab generator
(:mod:`synclab.lab.labgen`) puts the first two rungs under the exercise's heading in the lab, where the
answer is the reader's own. A hint never holds code that can be pasted as the answer: it names where the
data should live and which operations fit, and leaves the writing to the reader.

Written once, here, so that a page and its lab cannot give different hints.
"""

from __future__ import annotations

from typing import NamedTuple


class Hint(NamedTuple):
    title: str  # what the hint is about, shown on the closed fold
    text: str  # markdown


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
    "2.1": (
        Hint("where the wait should go",
             "On a CUDA-like platform `_pool` should only queue work and return. The one wait per step belongs in "
             "`get_output()`, and it should wait for this step's copies alone, not the whole device: an event "
             "recorded right after them."),
        Hint("which calls, in which order",
             "Inside `with torch.cuda.stream(side):` make the side stream `wait_stream` the compute stream, queue "
             "the non-blocking copies into pinned host buffers, and record the event **inside** the block. Keep "
             "the device tensors referenced until `get_output()` has synchronized on the event, then drop them "
             "(or mark them with `record_stream` on the side stream). "
             "Create the side stream the first time it is needed, and never on a CPU platform."),
    ),
    "2.2": (
        Hint("start from the outputs",
             "Are the outputs right? Wrong outputs mean the host read them before the copy landed: no wait, or "
             "an event that does not cover the copies. A copy not ordered after the forward shows in the stream "
             "log, not in the outputs: on a CPU the forward has finished before the copy starts (on a GPU the copy "
             "could read half-written rows). A device tensor freed too early corrupts outputs on a GPU only when its "
             "memory is reused in time; the simulation never reuses it, so it shows only in the tensors still "
             "alive."),
        Hint("then the waits and the log",
             "Where does the host wait, and for what: the whole device, or an event after the copies? Does the "
             "stream log order the copies after the forward? Does the device tensor live until the wait? Each label "
             "of `ch2.BUG_LABELS` leaves its own trace; name the mistake whose fix would make the other symptoms go "
             "away."),
    ),
    "3.1": (
        Hint("where the data should be before the copy",
             "A `non_blocking` upload is asynchronous only from pinned memory. So build (or copy) the host data "
             "into a pinned tensor first, when the platform has pinned memory, and only then send it."),
        Hint("which calls",
             "One `.to(device, dtype=dtype, non_blocking=True)` at the end; what goes before it depends on the "
             "input:\n\n"
             "- a list or an array: `torch.tensor(data, dtype=dtype, pin_memory=pin)` (`torch.as_tensor` takes no "
             "`pin_memory`);\n"
             "- a pageable CPU tensor: a pinned copy made by this call (sent from pageable memory the upload would "
             "be a staging copy, and the caller may change theirs once the call returns); convert its dtype in the "
             "upload itself or before pinning, never after (that makes a new, pageable tensor);\n"
             "- a tensor already pinned and contiguous: as it is (`pin_memory()` returns it unchanged);\n"
             "- a strided tensor, pinned or not: a contiguous copy, pinned (a strided one goes up through a "
             "pageable temporary)."),
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
    "6.1": (
        Hint("read what the count names",
             "The hunt's table (`ch6.stray_lines`) names each line that made a stray sync, and its kind. Before you "
             "change anything, say for each line which feature it serves and which side holds the data it needs: "
             "the host (send it without a wait) or the device (read it where the host already has a copy). Count "
             "again after each change: the cell under your answer counts your runner with the same two calls "
             "(`ch6.step_syncs`, then `ch6.stray_lines`)."),
        Hint("three kinds, three remedies",
             "The syncs are of three kinds, each with its remedy:\n\n"
             "- **an upload that blocks** (a Python list, or a Python number written through indices, `x[i, j] = v`): "
             "send the data with `self.upload`, chapter 3's helper; through one uploaded boolean mask, "
             "`x.masked_fill_(mask, v)` takes a Python number and uploads nothing (`x[mask] = v` with a Python number "
             "goes to the same masked_fill_);\n"
             "- **a result sized by device data** (`nonzero` of a mask already uploaded): the host made the mask, so "
             "use its own copy: upload the mask and `masked_fill_` with it, or upload its `nonzero` and write device "
             "values through those indices (`index_put_` with an uploaded tensor, not a Python number);\n"
             "- **a device value read back per request**: a hook that receives the step's host copy can read it "
             "there instead.\n\n"
             "Keep each piece of data on the side that uses it."),
    ),
    "6.2": (
        Hint("one count per step",
             "`each_step(engine)` returns the context manager the engine wraps around one step. `count_syncs()` is "
             "a context manager too, and its report is what a `with` statement binds with `as`; the engine's `with` "
             "binds nothing, so handing it count_syncs() counts the step and keeps no report. Write your own "
             "context manager "
             "(`contextlib.contextmanager`) that opens the count around its `yield`; after the `yield` the step is "
             "over, and the report's events can be split into planned and stray with `ch6.is_planned`."),
        Hint("the averages",
             "Per step means the run's total over its number of steps. Run with the `fixes` you are handed, never "
             "a set of your own: the check holds one back on purpose."),
    ),
    "6.3": (
        Hint("read the rows",
             "Compare each fix's row with the baseline's, one measure at a time: which numbers moved, and which "
             "stayed where they were?"),
        Hint("what grows with what",
             "In the host-work table, read each fix's gap to the baseline across the four columns: one pair of "
             "columns differs only in the tokens already out, the other only in the images per request. For the "
             "last question, use the MODEL figure of the device's busy share (in the lab, just before Exercise 6.3; on "
             "the page, under What the profile shows): how long does a step wait while any stray sync remains?"),
    ),
}


def ladder(task: str) -> tuple[Hint, Hint]:
    """The two hints of one exercise, first the gentler one."""
    try:
        return HINTS[task]
    except KeyError:
        raise KeyError(f"no hints for Exercise {task}: add them to synclab/lab/hints.py") from None


def lab_markdown(task: str) -> str:
    """The hints as a lab's markdown cell: two folds, to open one at a time."""
    parts = [f"**Stuck on {task}?** Open one hint at a time; try again after each."]
    for number, hint in enumerate(ladder(task), 1):
        parts.append(f"<details><summary>Hint {number}: {hint.title}</summary>\n\n{hint.text}\n\n</details>")
    return "\n\n".join(parts)
