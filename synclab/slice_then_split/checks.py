"""Chapter 1 (slice-then-split): the checks of the chapter's exercises, each a Check that names the reader's fault.

A room of :mod:`synclab.slice_then_split` (its docstring tells the chapter). The checks reach the reader's pooler
through runners (:func:`pooling_outcomes` and its kind), which run it where it lives and send back what it gave as
data, so that the grader judges 1.1 and 1.2 apart (:mod:`synclab.answer_keys.runners`).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from contextlib import nullcontext
from dataclasses import replace
from typing import Any, Callable

import torch

from synclab.answer_keys.plain_data import tensors_as_data, tensors_from_data
from synclab.answer_keys.runners import runs_with_the_answer
from synclab.checks import (Clause, Check, CheckFailed, CheckReport, expect, expect_equal, run_checks, found_right,
                            found_right_tensor)
from synclab.device import to_device
from synclab.dispatch import TorchCalls, count_torch_calls
from synclab.slice_then_split.workloads import (AllPoolClass, HOST_WORK_RATIO, POISON, PoolingRun, PoolingStep,
                                                SEQ_TASK, TOKEN_TASKS, build_metadata, handed_to, make_dispatcher,
                                                make_requests, pr_benchmark_batch, random_request_spec, requests_of,
                                                PR_GROUP_OFFSET, PR_TOKENS)
from synclab.syncs import SyncReport, count_syncs


# ----------------------------------------------------------------------------- runners: the pooler, where it lives
# The checks reach the reader's class through these (synclab.answer_keys.runners): in a notebook they run here; in
# the grader they run in the answer's process, and what comes back is data: each output's values, whether it views
# the hidden-states buffer, what the step copied and counted. The checks replay the same run (its requests and
# schedule are data too) to know what each step must give, without the reader's code.


def run_spec(requests: dict, *, chunked: bool, slice_groups: bool, async_scheduling: bool = False,
             overwrite: bool = False, budget: int | None = None, schedule_seed: int = 0, steps: int | None = None,
             counted: bool = False, copies: bool = False) -> dict:
    """One run of the engine loop, as data: ``requests`` (:func:`random_request_spec`'s shape), the scheduler's
    settings and seed, whether the next forward overwrites the buffer, how many steps (None: until every prompt is
    done), and what to count: the first step's syncs (``counted``), every step's copies (``copies``)."""
    return {"requests": requests, "chunked": chunked, "slice_groups": slice_groups, "async": async_scheduling,
            "overwrite": overwrite, "budget": budget, "schedule_seed": schedule_seed, "steps": steps,
            "counted": counted, "copies": copies}


def _engine(run: dict) -> PoolingRun:
    """The run's engine loop, the same in every process: its requests, its schedule."""
    return PoolingRun(requests_of(run["requests"]), chunked=run["chunked"], rng=random.Random(run["schedule_seed"]),
                      token_budget=run["budget"])


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _outputs_as_data(outputs: Any, hidden_states: torch.Tensor, sequence: type | tuple = list) -> dict:
    """What a check reads of a call's result: each output's values and whether it views the buffer, or what else it
    was (:func:`synclab.answer_keys.plain_data.tensors_as_data`)."""
    def words(item: Any) -> str:  # anything but a tensor that crosses: a complex one says its dtype too
        return _describe(item) + (f" of {item.dtype}" if isinstance(item, torch.Tensor) else "")

    return tensors_as_data(outputs, lambda t: {"views": _shares_storage(t, hidden_states)}, words, sequence)


class _NotATensor:
    """An output that was neither None nor a tensor, as the runner described it (its reports say what it was)."""

    def __init__(self, text: str) -> None:
        self.text = text


class _NotAList(_NotATensor):
    """A call's result that was not a list."""


def _outputs_back(seen: dict) -> Any:
    """:func:`_outputs_as_data` read back: a list of host tensors, Nones and :class:`_NotATensor`, or a
    :class:`_NotAList`."""
    outputs = tensors_from_data(seen, _NotATensor)
    return _NotAList(seen["not_list"]) if outputs is None else outputs


class _CopySpy(torch.overrides.TorchFunctionMode):
    """Records the source of every copy made in the block (``clone``, ``copy_``): what was copied, not how often."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[torch.Tensor] = []

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None):
        name = getattr(func, "__name__", "")
        if name == "clone" and args and isinstance(args[0], torch.Tensor):
            self.sources.append(args[0])
        elif name == "copy_" and len(args) > 1 and isinstance(args[1], torch.Tensor):
            self.sources.append(args[1])
        return func(*args, **(kwargs or {}))


def _copied_request(source: torch.Tensor, step: PoolingStep, ends: list[int]) -> int | None:
    """The batch position of the request whose rows of ``step.hidden_states`` ``source`` views; None: other memory."""
    buffer = step.hidden_states
    if source.numel() == 0 or not _shares_storage(source, buffer):
        return None
    row = (source.storage_offset() - buffer.storage_offset()) // max(buffer.stride(0), 1)
    return next((pos for pos, end in enumerate(ends) if row < end), None)


def _syncs_as_data(report: SyncReport) -> dict:
    """What the checks read of a count: the syncs, the first four of them (kind, reader's line) and the bytes read."""
    return {"count": report.count, "where": [f"{e.kind.value} at {e.where}" for e in report.events[:4]],
            "bytes_to_host": report.bytes_to_host}


@runs_with_the_answer
def pooling_outcomes(all_pool: AllPoolClass, run: dict, catch: bool = True) -> dict:
    """``all_pool`` driven through ``run`` (:func:`run_spec`) by the dispatcher: per step, its outputs as data, read
    when the runner reads them (before the next forward; under async scheduling, after it), the cache each request
    holds after the step, and what ``run`` asks counted. A step whose call raises ends the run, said as
    ``crashed`` (``catch=False``: raised, so that a check reports it from the reader's line)."""
    engine = _engine(run)
    dispatcher = make_dispatcher(all_pool, chunked=run["chunked"], async_scheduling=run["async"],
                                 slice_groups=run["slice_groups"])
    steps: list[dict] = []
    for step in engine.steps():
        spy = _CopySpy() if run["copies"] else nullcontext()
        try:
            with count_syncs() if run["counted"] and not steps else nullcontext() as report, spy:
                outputs = dispatcher(step.hidden_states, step.metadata)
        except Exception:
            if not catch:
                raise
            return {"steps": steps, "crashed": True}
        seen: dict[str, Any] = {} if run["async"] else {"outputs": _outputs_as_data(outputs, step.hidden_states)}
        if run["overwrite"]:
            engine.overwrite_buffer()
        if run["async"]:
            seen["outputs"] = _outputs_as_data(outputs, step.hidden_states)
        seen["caches"] = [len(req.state.hidden_states_cache) for req in step.requests]
        if report is not None:
            seen["syncs"] = _syncs_as_data(report)
        if isinstance(spy, _CopySpy):
            sizes = step.metadata.get_pooling_cursor().num_scheduled_tokens_cpu.tolist()  # host tensor
            ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]
            seen["copied"] = [_copied_request(source, step, ends) for source in spy.sources]
        steps.append(seen)
        if run["steps"] is not None and len(steps) == run["steps"]:
            break
    return {"steps": steps, "crashed": False}


@runs_with_the_answer
def empty_outcome(all_pool: AllPoolClass, chunked: bool) -> dict:
    """``all_pool``'s output for a sub-group of no request, as data."""
    meta = build_metadata([], torch.zeros(0, dtype=torch.int64))
    hidden = to_device(torch.zeros(0, 8))  # [0, hidden] device
    return _outputs_as_data(all_pool(enable_chunked_prefill=chunked)(hidden, meta), hidden)


@runs_with_the_answer
def host_work_outcome(all_pool: AllPoolClass, group_size: int, chunked: bool) -> dict:
    """One counted ``forward`` on PR #41163's batch (:func:`host_calls_per_call`): its torch calls by name, and its
    outputs as data."""
    whole_batch, group = pr_benchmark_batch(group_size, hidden_size=8)
    hidden_states, group = handed_to(all_pool, whole_batch, group)
    pool = all_pool(enable_chunked_prefill=chunked)
    with count_torch_calls() as calls:
        outputs = pool(hidden_states, group)
    return {"calls": dict(calls.by_name), "outputs": _outputs_as_data(outputs, hidden_states)}


@runs_with_the_answer
def unsliced_outcome(all_pool: AllPoolClass) -> dict:
    """``all_pool`` handed the whole batch's rows for a sub-group of fewer (1.2's invariant): what it raised (a
    ValueError, or torch's RuntimeError), or how many outputs it gave. Any other exception is the reader's crash."""
    requests = make_requests([2, 3, 4], tasks=[SEQ_TASK, "token_embed", "token_embed"])
    step = next(PoolingRun(requests, chunked=False).steps())
    group = step.metadata[1:]  # the ALL-pooling sub-group, handed the WHOLE batch's rows (9, not 7)
    try:
        outputs = all_pool(enable_chunked_prefill=False)(step.hidden_states, group)
    except ValueError:
        return {"raised": "ValueError"}
    except NotImplementedError:
        raise
    except RuntimeError as exc:
        return {"raised": "RuntimeError", "message": str(exc)[:300]}
    return {"outputs": len(outputs) if isinstance(outputs, list) else type(outputs).__name__}


@runs_with_the_answer
def split_outcome(all_pool: AllPoolClass, requests: dict) -> dict:
    """``split_hidden_states`` alone on one whole step of ``requests``: its chunks as data."""
    step = next(PoolingRun(requests_of(requests), chunked=False).steps())
    chunks = all_pool(enable_chunked_prefill=False).split_hidden_states(step.hidden_states,
                                                                        step.metadata.get_pooling_cursor())
    return _outputs_as_data(chunks, step.hidden_states, (list, tuple))


# ----------------------------------------------------------------------------- running a workload under check


def _describe(t: Any) -> str:
    """What an output is, whatever the reader returned: a tensor's shape, else its type and value."""
    if t is None:
        return "None"
    if isinstance(t, _NotAList):
        return f"{t.text} (not a list)"
    if isinstance(t, _NotATensor):
        return t.text
    if isinstance(t, torch.Tensor):
        return f"tensor of shape {list(t.shape)}"
    text = repr(t)
    return f"{type(t).__name__} {text if len(text) <= 60 else text[:57] + '...'} (not a tensor)"


def _same(got: Any, want: torch.Tensor | None) -> bool:
    if got is None or want is None:
        return got is None and want is None
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return False
    return torch.equal(got.detach().cpu(), want)


def _rows_elsewhere(got: torch.Tensor, hidden_states: torch.Tensor) -> str | None:
    """``"a:b"`` when ``got`` [n, hidden] equals rows a..b-1 of this step's hidden states, else None."""
    rows, flat = got.detach().cpu(), hidden_states.detach().cpu()
    if rows.dim() != 2 or flat.dim() != 2 or rows.shape[0] == 0 or rows.shape[1] != flat.shape[1]:
        return None
    for start in range(flat.shape[0] - rows.shape[0] + 1):
        if torch.equal(flat[start:start + rows.shape[0]], rows):
            return f"{start}:{start + rows.shape[0]}"
    return None


def _expect_outputs(outputs: Any, step: PoolingStep, case: str, when: str) -> None:
    """``outputs`` (:func:`_outputs_back`) are the step's: one per request, its rows once its prompt is complete."""
    expect(not isinstance(outputs, _NotAList), "forward must return a list (one item per request)",
           got=outputs.text if isinstance(outputs, _NotAList) else "", case=case)
    expect_equal(len(outputs), len(step.requests), what="number of outputs", case=case,
                 hint="one item per request of the batch, in batch order")
    for pos, (got, req) in enumerate(zip(outputs, step.requests)):
        want = req.expected_output() if req.finished else None
        if _same(got, want):  # found right: reported as the request's expected rows (None while unfinished)
            found_right_tensor(want)
            continue
        hint = ("an unfinished request gives None; a finished one gives all of its prompt's hidden states, "
                "concatenated across chunks")
        if want is None and isinstance(got, torch.Tensor) and got.numel():
            hint = ("this request's prompt is not complete yet, but your pooler returned its rows: take whether a "
                    "request finished in this step from the cursor (pooling_cursor.get_finished_mask()), not from a "
                    "rule of your own; an unfinished request's item is None")
        elif want is None:
            hint = "this request's prompt is not complete yet: its item must be None itself (not [] or an empty tensor)"
        elif got is None:
            hint = ("this request's prompt completes in this step, but your pooler returned None: take whether a "
                    "request finished from the cursor (pooling_cursor.get_finished_mask()), not a rule of your own")
        elif not isinstance(got, torch.Tensor):
            hint = "a finished request gives one tensor [num_prompt_tokens, hidden]: its hidden states"
        if want is not None and isinstance(got, torch.Tensor) and got.shape == want.shape:
            if (got.detach().cpu() == POISON).any():
                hint = ("the output holds values the NEXT step wrote into the hidden-states buffer: a chunk kept "
                        "across steps (or, under async scheduling, a finished output) must be .clone()d: pass every chunk "
                        "through ch1.kept_chunk(chunk, finished=..., first_chunk=..., clone_finished=...), first_chunk "
                        "telling whether the request's cache was empty before this chunk (read it before the append: "
                        "`not state.hidden_states_cache`; len(cache) == 1 is that question only after it)")
            elif _rows_elsewhere(got, step.hidden_states) is not None:
                hint = (f"these are rows {_rows_elsewhere(got, step.hidden_states)} of the batch: another place than "
                        "this request's. The sub-group does not start at row 0: slice from its first token "
                        "(cursor.first_token_indices_gpu[0]) to its last token + 1, then split")
            else:
                hint = ("right shape, wrong values. If this prompt came in several chunks, a kept chunk is probably "
                        "a view of the hidden-states buffer, which every step's forward overwrites: .clone() it "
                        "(ch1.kept_chunk decides). "
                        "Otherwise, check which rows you sliced and the order of the chunks")
        other = next((j for j, r in enumerate(step.requests) if j != pos and r.finished and isinstance(got, torch.Tensor)
                      and _same(got, r.expected_output())), None) if want is not None else None
        # the order, not the rows: this request got another's output whole, and its own went to another place (rows
        # sliced from the wrong start also land on other requests' rows, but its own output is then nowhere)
        if other is not None and any(_same(o, want) for j, o in enumerate(outputs) if j != pos):
            hint = (f"this is request {other}'s output, another request of this step: the outputs come out in the "
                    "batch's order, each request's rows where the cursor puts them (split by the sizes in the "
                    "cursor's order, without sorting or reordering them)")
        raise CheckFailed(f"wrong output for request {pos} of the batch ({req.task}, {when})",
                          expected=_describe(want) + (" equal to the prompt's hidden states" if want is not None else ""),
                          got=_describe(got) + (" with different values" if isinstance(got, torch.Tensor)
                                                and want is not None and got.shape == want.shape else ""),
                          case=case, hint=hint)



def run_workload(all_pool: AllPoolClass, run: dict, *, case: str, check_clean: bool = False,
                 check_outputs: bool = True) -> list[dict]:
    """Drive ``run`` (:func:`run_spec`) through the engine loop with the reader's pooler, checking every step's
    outputs against the requests' prompts; what each step gave, as data.

    Without async scheduling the runner reads the outputs before the next forward; with it, only after the buffer
    was overwritten (:func:`pooling_outcomes` reads them when the runner would). ``check_outputs=False`` checks only
    the caches (``check_clean``): one check, one fault.
    """
    got = pooling_outcomes(all_pool, run)
    for step_no, (step, seen) in enumerate(zip(_engine(run).steps(), got["steps"])):
        if check_outputs:
            when = f"step {step_no}, read after the next step's forward" if run["async"] else f"step {step_no}"
            _expect_outputs(_outputs_back(seen["outputs"]), step, case, when)
        for pos, req in enumerate(step.requests if check_clean else []):
            if req.finished and req.task in TOKEN_TASKS:
                expect_equal(seen["caches"][pos], 0, what=f"the number of cached chunks of request {pos} after it finished",
                             case=f"{case}, step {step_no}",
                             hint="call state.clean() once a finished request's output is built: the cache "
                                  "would otherwise grow with every request the engine ever served")
    if got["crashed"]:  # every step before it was right: run it again to raise from the reader's line
        pooling_outcomes(all_pool, run, False)
        raise CheckFailed("your pooler raised on this run once, and not when it ran again", case=case,
                          hint="an answer that depends on something outside its inputs (a global, the time) cannot "
                               "be checked: make forward a function of its arguments and the request states")
    return got["steps"]


# ----------------------------------------------------------------------------- checks shared by 1.1 and 1.2


def _given(lens: list[int], tasks: list[str] | None = None, seed: int = 0) -> dict:
    """Requests of fixed lengths (and tasks), as data."""
    return {"lens": lens, "tasks": tasks, "seed": seed}


def _fixed_cases(slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        def go(lens: list[int], case: str, *, tasks: list[str] | None = None, chunked: bool = False,
               budget: int | None = None) -> None:
            run_workload(all_pool, run_spec(_given(lens, tasks), chunked=chunked, slice_groups=slice_groups,
                                            budget=budget), case=case)

        go([5], "one request of 5 tokens")
        go([1, 5, 2], "three requests of 1, 5 and 2 tokens")
        go([3, 4, 2, 6], "a sub-group that does not start at row 0: tasks classify, token_classify x2, classify",
           tasks=[SEQ_TASK, "token_classify", "token_classify", SEQ_TASK])
        go([2, 3, 4, 1, 2], "two ALL-pooling sub-groups: token_embed, classify, token_embed x2, classify",
           tasks=["token_embed", SEQ_TASK, "token_embed", "token_embed", SEQ_TASK])
        go([10], "chunked prefill: one prompt of 10 tokens in chunks of 4, 4, 2", chunked=True, budget=4)
        go([6, 3, 5], "chunked prefill: 14 tokens through a budget of 5 per step (finished and unfinished mixed)",
           chunked=True, budget=5)

    return run


def _random_cases(slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        for trial in range(30):
            num_reqs = rng.choice([1, 2, 3, rng.randrange(1, 20), rng.randrange(1, 257)])  # no request, no step: its own check
            chunked, mixed, async_sched = rng.random() < 0.6, rng.random() < 0.5, rng.random() < 0.3
            requests = random_request_spec(rng, num_reqs, mixed_tasks=mixed)
            budget = rng.randrange(1, 64) if chunked else None
            case = (f"random batch #{trial}: {num_reqs} requests, chunked prefill {chunked}, mixed tasks {mixed}, "
                    f"async scheduling {async_sched}")
            run_workload(all_pool, run_spec(requests, chunked=chunked, slice_groups=slice_groups,
                                            async_scheduling=async_sched, budget=budget,
                                            schedule_seed=rng.randrange(2**31)), case=case)

    return run


_EMPTY_HINT = "there is no first request to read a bound from: return [] before touching the cursor"


def _check_empty(all_pool: AllPoolClass, rng: random.Random) -> None:
    for chunked in (False, True):
        case = f"0 requests, chunked prefill {chunked}"  # named before the call: a crash reports it
        out = _outputs_back(empty_outcome(all_pool, chunked))
        pieces = isinstance(out, list) and bool(out) and all(isinstance(o, torch.Tensor) and not len(o) for o in out)
        got = _describe(out) if not isinstance(out, list) else "[" + ", ".join(map(_describe, out[:3])) + (
            ", ...]" if len(out) > 3 else "]")
        if pieces:
            hint = ("no request, no item: splitting 0 rows at no offsets still gives one (empty) piece, so return [] "
                    "when the sub-group has no request")
        elif isinstance(out, _NotAList):  # a tuple, say: the split's own result passed on
            hint = ("forward returns a list (PoolerOutput is a list), and this is not one: wrap what you return in "
                    "list(...)")
        else:
            hint = _EMPTY_HINT
        expect(isinstance(out, list) and out == [], "an empty batch must give an empty list",
               expected=[], got=got, case=case, hint=hint)
        found_right([])


def _check_buffer_reuse(slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        def go(requests: dict, case: str, *, chunked: bool, async_scheduling: bool, budget: int | None = None,
               schedule_seed: int = 0) -> None:
            run_workload(all_pool, run_spec(requests, chunked=chunked, slice_groups=slice_groups,
                                            async_scheduling=async_scheduling, overwrite=True, budget=budget,
                                            schedule_seed=schedule_seed), case=case)

        go(_given([9, 4, 7]), "chunked prefill, the buffer overwritten after every step", chunked=True,
           async_scheduling=False, budget=5)
        go(_given([3, 1, 4]), "async scheduling: outputs read after the next step's forward (no chunking)",
           chunked=False, async_scheduling=True)
        go(_given([6, 2, 5]), "async scheduling with chunked prefill", chunked=True, async_scheduling=True, budget=4)
        for trial in range(10):
            async_sched = rng.random() < 0.5
            requests = random_request_spec(rng, rng.randrange(1, 40), mixed_tasks=True)
            go(requests, f"random chunked run #{trial} with the buffer overwritten, async scheduling {async_sched}",
               chunked=True, async_scheduling=async_sched, budget=rng.randrange(1, 32),
               schedule_seed=rng.randrange(2**31))

    return run


def _check_cleaned(slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        run_workload(all_pool, run_spec(_given([6, 3, 5]), chunked=True, slice_groups=slice_groups, budget=5),
                     check_clean=True, check_outputs=False,
                     case="chunked prefill: 14 tokens through a budget of 5 per step")
        for trial in range(5):
            requests = random_request_spec(rng, rng.randrange(1, 30), mixed_tasks=True)
            run_workload(all_pool, run_spec(requests, chunked=True, slice_groups=slice_groups,
                                            async_scheduling=rng.random() < 0.5, budget=rng.randrange(1, 32),
                                            schedule_seed=rng.randrange(2**31)),
                         check_clean=True, check_outputs=False, case=f"random chunked run #{trial}")

    return run


def _check_no_needless_copies(slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        for chunked in (False, True):
            case = f"one step, chunked prefill {chunked}, no async scheduling"
            (seen,) = run_workload(all_pool, run_spec(_given([3, 1, 4]), chunked=chunked, slice_groups=slice_groups,
                                                      steps=1), case=case, check_outputs=False)
            items = seen["outputs"].get("items", [])
            copied = [i for i, item in enumerate(items) if item is not None and "tensor" in item and not item["views"]]
            expect(not copied, f"outputs {copied} are copies", case=case, expected="views into hidden_states (the "
                   "runner copies them to the host before the next forward)",
                   got=f"{len(copied)} of {len(items)} outputs in new memory",
                   hint="clone only what must outlive the step: unfinished chunks, and finished outputs under "
                        "async scheduling; a single chunk is returned as it is, not through torch.cat")
        _copies_over_chunked_runs(all_pool, slice_groups, rng)  # a step's clones, as requests finish after chunks

    return run


def _sync_bound(limit: int, slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        for num_reqs in (1, 16, 64):
            lens = random_request_spec(rng, num_reqs + 1, mixed_tasks=False)["lens"]
            # a classify request first: the ALL-pooling sub-group's rows do not start at row 0
            requests = _given(lens, [SEQ_TASK] + ["token_embed"] * num_reqs, seed=rng.randrange(1000))
            requests_said = f"{num_reqs} request{'' if num_reqs == 1 else 's'}"
            case = f"the counted call, {requests_said}"
            (seen,) = run_workload(all_pool, run_spec(requests, chunked=True, slice_groups=slice_groups,
                                                      budget=10 * num_reqs, schedule_seed=rng.randrange(2**31),
                                                      steps=1, counted=True), case=case)
            syncs = seen["syncs"]
            where = "; ".join(syncs["where"])
            expect(syncs["count"] <= limit, f"{syncs['count']} sync{'' if syncs['count'] == 1 else 's'} in one call "
                   f"for {requests_said}", expected=f"at most {limit}", got=f"{syncs['count']}: {where}",
                   case=requests_said, hint="read the sub-group's two bounds once, then split by "
                   "num_scheduled_tokens_cpu (host)" if limit else
                   "the sizes are on the host (num_scheduled_tokens_cpu): split by them alone")
            values = syncs["bytes_to_host"] // 8  # the cursor's indices are int64
            expect(values <= limit, f"{values} values read back from the device for {requests_said}",
                   expected=f"at most {limit} (where the sub-group starts and where it ends)",
                   got=f"{values} values ({syncs['bytes_to_host']} bytes of int64): {where}", case=requests_said,
                   hint="each sync should bring back one number, not a whole index tensor: the sub-group's first "
                        "row is the first entry of one index tensor, its last row the last entry of the other")

    return run


def host_calls_per_call(all_pool: AllPoolClass, group_size: int, *, chunked: bool = False) -> TorchCalls:
    """The torch calls one ``forward`` makes on a sub-group of ``group_size`` whole prompts (PR #41163's batch)."""
    return TorchCalls(Counter(host_work_outcome(all_pool, group_size, chunked)["calls"]))


def _wanted_rows(group_size: int) -> list[torch.Tensor]:
    """The rows each request of PR #41163's sub-group of ``group_size`` must get: its prompt's, whole."""
    whole_batch, _ = pr_benchmark_batch(group_size, hidden_size=8)
    start = PR_GROUP_OFFSET * PR_TOKENS  # every prompt is whole: request i of the sub-group owns PR_TOKENS rows
    return [whole_batch[start + i * PR_TOKENS:start + (i + 1) * PR_TOKENS].cpu() for i in range(group_size)]


# Reads of the finished flags as #41163 left them (``cursor.is_finished()``, a host bool tensor, iterated): one
# ``__bool__`` per request, which the PR kept. The check measures what the PR changed, the slices, so these are
# left out (later vLLM's ``get_finished_mask()`` gives a host list, and the lab's solution uses it).
FLAG_READS = ("__bool__", "__iter__")


def _without_flag_reads(calls: dict[str, int]) -> dict[str, int]:
    return {name: n for name, n in calls.items() if name not in FLAG_READS}


def _host_work_flat(all_pool: AllPoolClass, rng: random.Random) -> None:
    small, large = 8, 48
    for chunked in (False, True):
        counted = {n: host_work_outcome(all_pool, n, chunked) for n in (small, large)}
        for n, seen in counted.items():  # the calls counted are calls whose results count
            case = f"the counted call: a sub-group of {n} whole prompts, chunked prefill {chunked}"
            outputs, wanted = _outputs_back(seen["outputs"]), _wanted_rows(n)
            expect(isinstance(outputs, list) and len(outputs) == n, "the counted call's outputs are not one per "
                   "request", case=case, expected=f"a list of {n} tensors", got=_describe(outputs))
            bad = [i for i, (got, want) in enumerate(zip(outputs, wanted)) if not _same(got, want)]
            expect(not bad, f"the counted call returned wrong rows for requests {bad[:5]}", case=case,
                   expected="each request's rows of the batch", got=_describe(outputs[bad[0]]) if bad else "",
                   hint="the call whose host work is counted must also be right: same code path as every other")
            for want in wanted:
                found_right_tensor(want)
        few = _without_flag_reads(counted[small]["calls"])
        many = _without_flag_reads(counted[large]["calls"])
        n_few, n_many = sum(few.values()), sum(many.values())
        grew = sorted((name for name in many if many[name] > few.get(name, 0)), key=lambda n: few.get(n, 0) - many[n])
        slices = "__getitem__" in grew
        read_flags = any(name in counted[large]["calls"] for name in FLAG_READS)  # said only where it was done
        expect(n_many <= HOST_WORK_RATIO * max(n_few, 1),
               f"the host's torch calls per forward grow with the requests ({n_few} -> {n_many})",
               case=f"sub-groups of {small} and {large} whole prompts, chunked prefill {chunked}",
               expected=f"at most {HOST_WORK_RATIO:g}x as many calls for {large} requests as for {small}"
                        + (" (reading the flags of is_finished()'s tensor one by one, as vLLM's code at the PR did, "
                           "is not counted)" if read_flags else ""),
               got=f"{n_many / max(n_few, 1):.1f}x; what grew: "
                   + ", ".join(f"{n} x{few.get(n, 0)} -> x{many[n]}" for n in grew[:4]),
               hint="this is what #41163 removed: one slice per request is one torch call per request. Slice the "
                    "sub-group once and split it: split makes all the views in one call" if slices else
                    "a clone per request: clone only what must outlive the step (an unfinished request's chunk; a "
                    "finished one's only under async scheduling), and return the other views as they are"
                    if grew and grew[0] == "clone" else
                    "torch.cat runs once per request: a request finished with its only chunk returns that chunk as "
                    "it is (a cat of one tensor is a copy); only a request with earlier chunks needs torch.cat"
                    if grew and grew[0] == "cat" else
                    f"{grew[0] if grew else 'a call'} runs once per request: that is host work that grows with the "
                    "batch. Find the loop that makes it and do the work in one call for the whole sub-group")



# ----------------------------------------------------------------------------- Exercise 1.1


def _split_sizes_hint(error: str) -> str:
    """torch's words when the split sizes do not add up to the rows split, read for which way they miss: a slice one
    row short is the inclusive end read as exclusive; more rows than the sizes is a split of more than the sub-group."""
    said = re.search(r"sum exactly to (\d+) .*split_sizes=\[([\d, ]*)\]", error)
    rows = int(said.group(1)) if said else 0
    sizes = sum(int(n) for n in said.group(2).split(",") if n.strip()) if said else 0
    if sizes == rows + 1:
        return (f"your slice has {rows} row{'s' * (rows != 1)}, 1 fewer than the sizes: last_token_indices_gpu is "
                "inclusive, so the slice ends at its last token + 1 (a slice's end is exclusive)")
    if sizes > rows:
        return (f"your slice has {rows} row{'s' * (rows != 1)}, {sizes - rows} fewer than the sizes: either the slice "
                "ends short (the sub-group runs from the first request's first token, first_token_indices_gpu[0], to "
                "the LAST request's last token, last_token_indices_gpu[-1], + 1), or the sizes are not this step's "
                "rows (split by num_scheduled_tokens_cpu, a chunk's rows, not by the prompts' lengths)")
    return ("the sizes do not add up to the rows you split. Split only the sub-group's rows: slice them first, from "
            "its first token (first_token_indices_gpu[0]) to its last token + 1 (last_token_indices_gpu is inclusive), "
            "then split that slice")


# torch's own words when the sizes are a tensor, or do not add up to the rows sliced (which way they miss, said)
SPLIT_SIZES_HINT = (("must be tuple of ints, not Tensor", "split takes the sizes as Python ints: "
                     "cursor.num_scheduled_tokens_cpu.tolist() (a host tensor: reading it is no sync)"),
                    ("split_sizes", _split_sizes_hint))

CHECKS_1_1 = [
    Check("1.1", "same outputs as the reference on fixed cases (sub-groups, chunked prefill)", _fixed_cases(False),
          crash_hints=SPLIT_SIZES_HINT, random=False, id="fixed-cases"),
    Check("1.1", "empty batch gives []", _check_empty, hint=_EMPTY_HINT, random=False, id="empty-batch"),
    Check("1.1", "same outputs on random batches (1 to 256 requests, chunked, mixed tasks)", _random_cases(False),
          crash_hints=SPLIT_SIZES_HINT, id="random-batches"),
    Check("1.1", "a finished request's cache is cleaned", _check_cleaned(False), id="cache-cleaned"),
    Check("1.1", "chunks kept across steps survive the next step's forward", _check_buffer_reuse(False),
          id="kept-chunks-survive"),
    Check("1.1", "no needless copies, with and without async scheduling", _check_no_needless_copies(False),
          id="no-needless-copies"),
    Check("1.1", "at most 2 syncs and 2 values read back per call, whatever the batch size", _sync_bound(2, False),
          timeout_s=60, id="two-syncs"),
    Check("1.1", "host work per call does not grow with the requests (one slice, one split)",
          _host_work_flat, random=False, id="flat-host-work"),
]


def check_all_pool(all_pool: AllPoolClass, seed: int | None = None) -> CheckReport:
    """Exercise 1.1: ``all_pool`` is the reader's ``AllPool`` class, called as vLLM's DispatchPooler did at #41163."""
    return run_checks("Exercise 1.1 — AllPool.forward (slice, then split)", CHECKS_1_1, all_pool, seed=seed)



# ----------------------------------------------------------------------------- Exercise 1.2 (stretch)


def _check_rejects_unsliced(all_pool: AllPoolClass, rng: random.Random) -> None:
    case = "9 rows for a sub-group of 7 tokens"
    seen = unsliced_outcome(all_pool)
    if seen.get("raised") == "ValueError":
        return
    if seen.get("raised") == "RuntimeError":
        raise CheckFailed("torch raised before your code did", expected="ValueError naming the invariant",
                          got=f"RuntimeError: {seen['message']}", case=case,
                          hint="compare hidden_states.shape[0] with the sizes' sum yourself: shapes are host "
                               "metadata, so the test costs no sync")
    raise CheckFailed("hidden states whose rows do not match the sizes were split anyway",
                      expected="ValueError", got=f"{seen['outputs']} outputs, silently misaligned", case=case,
                      hint="splitting by host sizes is only right when the caller sliced the sub-group's rows; "
                           "check rows == sum(sizes) and raise ValueError otherwise")


def _check_split_alone(all_pool: AllPoolClass, rng: random.Random) -> None:
    for trial in range(10):
        num_reqs = rng.choice([1, 2, rng.randrange(1, 65)])
        spec = random_request_spec(rng, num_reqs, mixed_tasks=False)
        requests = requests_of(spec)
        case = f"split_hidden_states alone, {num_reqs} requests of {spec['lens'][:6]}... tokens"
        seen = split_outcome(all_pool, spec)
        chunks = _outputs_back(seen)
        expect(not isinstance(chunks, _NotAList), "split_hidden_states must return a list (one view per request)",
               got=_describe(chunks), case=case)
        expect_equal(len(chunks), num_reqs, what="number of chunks", case=case)
        for i, (chunk, item, req) in enumerate(zip(chunks, seen["items"], requests)):
            expect(_same(chunk, req.prompt_hidden), f"chunk {i} is not request {i}'s rows", case=case,
                   expected=_describe(req.prompt_hidden), got=_describe(chunk),
                   hint="split by cursor.num_scheduled_tokens_cpu, in batch order")
            expect(item["views"], f"chunk {i} is a copy", case=case,
                   hint="split() returns views; copying is forward()'s decision, not the split's")
            found_right_tensor(req.prompt_hidden)
CHECKS_1_2 = [
    Check("1.2", "split_hidden_states alone: one view per request", _check_split_alone, id="one-view-per-request"),
    Check("1.2", "same outputs on fixed cases, through the slicing dispatcher", _fixed_cases(True), random=False,
          id="fixed-cases"),
    Check("1.2", "empty batch gives []", _check_empty, random=False, id="empty-batch"),
    Check("1.2", "same outputs on random batches", _random_cases(True), id="random-batches"),
    Check("1.2", "a finished request's cache is cleaned", _check_cleaned(True), id="cache-cleaned"),
    Check("1.2", "chunks kept across steps survive the next step's forward", _check_buffer_reuse(True),
          id="kept-chunks-survive"),
    Check("1.2", "no needless copies, with and without async scheduling", _check_no_needless_copies(True),
          id="no-needless-copies"),
    Check("1.2", "rows that do not match the sizes raise ValueError", _check_rejects_unsliced, random=False,
          crash_hints=(("AssertionError", "an assert is not the contract's ValueError (and `python -O` drops it): "
                                          "raise ValueError naming the rows and the sizes' sum"),),
                                              id="mismatched-rows-raise"),
    Check("1.2", "0 syncs per call", _sync_bound(0, True), timeout_s=60, id="no-syncs"),
    Check("1.2", "host work per call does not grow with the requests (one split)", _host_work_flat, random=False,
          id="flat-host-work"),
]


def check_all_pool_no_sync(all_pool: AllPoolClass, seed: int | None = None) -> CheckReport:
    """Exercise 1.2: the zero-sync ``AllPool``, called by a dispatcher that slices each sub-group's rows.

    Where the reader's class inherits ``forward`` from their own 1.1 and its split passes alone, a failure of what
    ``forward`` does is 1.1's: each such failure's hint says so first (the grader judges 1.2 on the package's 1.1
    where the reader's fails its own checks)."""
    report = run_checks("Exercise 1.2 — AllPool with 0 syncs", CHECKS_1_2, all_pool, seed=seed)
    split_alone = next((o for o in report.outcomes if o.name == CHECKS_1_2[0].name), None)
    if split_alone is not None and split_alone.ok and _inherits_a_readers_forward(all_pool):
        own = {check.name for check in CHECKS_1_2 if check.run in (_check_split_alone, _check_rejects_unsliced)}
        report.outcomes = [replace(o, hint=_INHERITED_HINT + o.hint) if not o.ok and o.status != "skipped"
                           and o.name not in own and not o.name.startswith("0 syncs") else o for o in report.outcomes]
    return report


_INHERITED_HINT = ("your AllPoolNoSync inherits forward from your AllPool (Exercise 1.1), and its own split passes: "
                   "this is forward's doing, to fix in 1.1 (the grader judges 1.2 on the package's 1.1 where yours "
                   "fails its own checks). ")


def _inherits_a_readers_forward(all_pool: Any) -> bool:
    """Whether ``all_pool`` (a class) takes ``forward`` from a class of the reader's, not one of the package's."""
    if not isinstance(all_pool, type) or "forward" in vars(all_pool):
        return False
    owner = next((c for c in all_pool.__mro__ if "forward" in vars(c)), None)
    return owner is not None and not owner.__module__.startswith("synclab")



# ----------------------------------------------------------------------------- counting copies (1.1 and 1.2)


def _copies_per_step(all_pool: AllPoolClass, requests: dict, *, async_scheduling: bool, slice_groups: bool,
                     token_budget: int, case: str, schedule_seed: int) -> None:
    """A chunked run of token tasks: each step may copy only the chunks that must outlive it, once each.

    Those are the unfinished requests' chunks (kept for later steps) and, under async scheduling, a finished
    request's only chunk (returned, and read after the next forward). A request finishing after earlier chunks
    is returned through ``torch.cat``, which makes new storage: its last chunk needs no copy.
    """
    run = run_spec(requests, chunked=True, slice_groups=slice_groups, async_scheduling=async_scheduling,
                   budget=token_budget, schedule_seed=schedule_seed, copies=True)
    seen_steps = run_workload(all_pool, run, case=case, check_outputs=False)
    for step_no, (step, seen) in enumerate(zip(_engine(run).steps(), seen_steps)):
        sizes = step.metadata.get_pooling_cursor().num_scheduled_tokens_cpu.tolist()  # host tensor
        sole = [req.finished and size == req.prompt_len for req, size in zip(step.requests, sizes)]
        must_own = {pos for pos, req in enumerate(step.requests)
                    if not req.finished or (async_scheduling and sole[pos])}
        copied = seen["copied"]
        needless: list[str] = []
        once: set[int] = set()
        for pos in copied:
            if pos is None:
                needless.append("a tensor outside the hidden-states buffer (a concatenation, or a copy of a copy)")
            elif pos not in must_own:
                chunks = "its only chunk" if sole[pos] else "its last chunk, after earlier ones"
                needless.append(f"request {pos}'s chunk (finished this step: {chunks})")
            elif pos in once:
                needless.append(f"request {pos}'s chunk a second time")
            once.add(pos)
        if not needless:
            continue
        after_cat = [pos for pos in copied if pos is not None and pos not in must_own and not sole[pos]]
        if async_scheduling and (after_cat or None in copied):
            hint = ("under async scheduling a finished request's output is cloned only when this step's chunk is its "
                    "ONLY chunk. After earlier chunks, torch.cat already puts the output in new storage: cloning the "
                    "last chunk before the cat (or the concatenation after it) copies the data twice. Through "
                    "ch1.kept_chunk, first_chunk must be False here, the cache holding earlier chunks: ask "
                    "`not state.hidden_states_cache` before the append (len(cache) == 1 asks it only after)")
        elif after_cat:
            hint = ("without async scheduling a finished request's chunk is never cloned: after earlier chunks it "
                    "goes into torch.cat as a view (the cat makes new storage); alone, it is returned as it is")
        else:
            hint = ("clone each chunk that must outlive the step once: an unfinished request's chunk, and under "
                    "async scheduling a finished request's only chunk. Nothing else: ch1.kept_chunk, given the "
                    "request's finished flag and whether its cache was empty (ask before you append the chunk), "
                    "clones exactly these")
        raise CheckFailed(f"{len(needless)} needless cop{'y' if len(needless) == 1 else 'ies'} in step {step_no}",
                          expected=f"{len(must_own)} clone(s): the chunks of requests {sorted(must_own)}",
                          got=f"{len(copied)} cop{'y' if len(copied) == 1 else 'ies'}; needless: "
                              + "; ".join(needless[:3]),
                          case=f"{case}; step {step_no}: chunks of {sizes} tokens, "
                               f"{sum(r.finished for r in step.requests)} request(s) finish",
                          hint=hint)


def _copies_over_chunked_runs(all_pool: AllPoolClass, slice_groups: bool, rng: random.Random) -> None:
    """The needless-copies check over several chunked steps, with and without async scheduling.

    A request finishing after earlier chunks is returned through ``torch.cat`` (new storage): its last chunk
    is never cloned, whatever the scheduling.
    """
    for async_sched in (False, True):
        _copies_per_step(all_pool, _given([6, 2, 5]), async_scheduling=async_sched, slice_groups=slice_groups,
                         token_budget=4, schedule_seed=0,
                         case=f"chunked prefill, 13 tokens through a budget of 4, async scheduling {async_sched}")
    for trial in range(4):
        async_sched = trial % 2 == 1
        _copies_per_step(all_pool, random_request_spec(rng, rng.randrange(1, 24), mixed_tasks=False),
                         async_scheduling=async_sched, slice_groups=slice_groups,
                         token_budget=rng.randrange(2, 24), schedule_seed=rng.randrange(2**31),
                         case=f"random chunked run #{trial}, async scheduling {async_sched}")


# ----------------------------------------------------------------------------- the clauses of 1.1 and 1.2
# Each clause of the contracts (the page's "The lab", the lab's exercise): its check, fixed case, honest mistake
# (tests/honest/wrong/<wrong>.py) and the words its failure holds; tests/test_clauses.py holds them to it.

CLAUSES = [
    Clause("1.1-empty", "An empty sub-group gives []", "empty-batch", "0 requests, chunked prefill False",
           "1.1-bounds-read-before-empty-test", "no first request to read a bound from", also=("random-batches",)),
    Clause("1.1-outlive", "a copy only for what must outlive the buffer",
           "kept-chunks-survive",
           "chunked prefill, the buffer overwritten after every step", "1.1-keeps-views-across-steps", ".clone() it",
           also=("fixed-cases", "random-batches"), lab="A chunk that outlives the step must"),
    Clause("1.1-clean", "its cache then cleaned", "cache-cleaned", "chunked prefill: 14 tokens through a budget",
           "1.1-cache-not-cleaned", "call state.clean()", lab="its cache is clean()ed"),
    Clause("1.1-host-work", "host work that does not grow with the requests", "flat-host-work",
           "sub-groups of 8 and 48 whole prompts", "1.1-slice-per-request-accumulate",
           "Slice the sub-group once and split it", lab="host work does not grow with the requests"),
    Clause("1.2-invariant", "a ValueError when the rows do not match the sizes",
           "mismatched-rows-raise", "9 rows for a sub-group of 7 tokens",
           "1.2-no-invariant-check", "compare hidden_states.shape[0] with the sizes' sum",
           lab="raise ValueError when it does not hold"),
    Clause("1.2-empty", "An empty sub-group gives []", "empty-batch", "0 requests, chunked prefill False",
           "1.2-tensor-split-no-empty-case", "still gives one (empty) piece",
           lab="An empty sub-group still gives []"),
    Clause("1.1-sub-group", "metadata sliced to this pooler's sub-group", "fixed-cases",
           "a sub-group that does not start at row 0", "1.1-whole-batch-split", "The sub-group does not start at row 0",
           also=("random-batches", "kept-chunks-survive", "two-syncs", "flat-host-work")),
    Clause("1.1-one-value", "2 syncs per call, whatever the batch size", "two-syncs", "16 requests",
           "1.1-bounds-read-whole", "each sync should bring back one number"),
    # the counted calls are of 1, 16 and 64 requests; a first chunked step may schedule none of the single one's rows
    Clause("1.2-zero-syncs", "0 syncs", "no-syncs", "request", "1.2-invariant-from-device-indices",
           "the sizes are on the host (num_scheduled_tokens_cpu): split by them alone", lab="with 0 syncs"),
]
