"""Chapter 1 (slice-then-split): the pooling workloads, the checks of Exercises 1.1 / 1.2, the profiling helpers.

The reader writes vLLM's ``AllPool`` (token-wise ALL pooling): for every request of
the batch, the hidden states of its scheduled tokens, accumulated across steps
under chunked prefill. Exercise 1.1 is the method as vLLM PR #41163 left it: one
slice of the whole sub-group (2 device reads) and one ``split`` by host-side
sizes. Exercise 1.2 (stretch) is later vLLM: the caller slices, the method splits
by host sizes alone, 0 device reads.

The workload is a small engine loop (:class:`PoolingRun`): requests with prompts
of known hidden states, a scheduler that cuts them into chunks under a token
budget, and a persistent hidden-states buffer that every step overwrites, as a
real runner's output buffer is.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import plotly.graph_objects as go
import torch

from synclab import figures
from synclab.checks import Check, CheckFailed, CheckReport, expect, expect_equal, run_checks
from synclab.device import DeviceLike, mark_like, pick_device, to_device
from synclab.engine.pool_metadata import PoolingMetadata, PoolingParams, PoolingStates
from synclab.engine.pooler import DispatchPooler, LastPool, PoolerOutput, TokenPoolingMethod
from synclab.profiling import Trace, profile
from synclab.reference import record
from synclab.syncs import count_syncs
from synclab.claims import Faster, declare, validated
from synclab.timing import Sweep, run_time, sweep

AllPoolClass = Callable[..., TokenPoolingMethod]  # AllPool(enable_chunked_prefill=..., async_scheduling=...)

TOKEN_TASKS = ("token_embed", "token_classify")  # served by ALL pooling
SEQ_TASK = "classify"  # served by LastPool: makes mixed batches, so AllPool gets a sub-group
POISON = -7.0  # what "the next forward" writes over the hidden-states buffer between steps


# ----------------------------------------------------------------------------- the workload


@dataclass
class PoolingRequest:
    """One pooling request: its prompt's hidden states (what the model will produce) and its progress."""

    req_id: int
    task: str
    prompt_hidden: torch.Tensor  # [prompt_len, hidden] host
    num_computed_tokens: int = 0
    state: PoolingStates = field(default_factory=PoolingStates)

    @property
    def prompt_len(self) -> int:
        return self.prompt_hidden.shape[0]

    @property
    def finished(self) -> bool:
        return self.num_computed_tokens == self.prompt_len

    def expected_output(self) -> torch.Tensor:
        """What the pooler must return when the prompt completes (ALL: every token; classify: the last)."""
        return self.prompt_hidden if self.task in TOKEN_TASKS else self.prompt_hidden[-1]


def make_requests(
    prompt_lens: list[int], hidden_size: int = 8, *, tasks: list[str] | None = None, seed: int = 0
) -> list[PoolingRequest]:
    gen = torch.Generator().manual_seed(seed)
    tasks = tasks or ["token_embed"] * len(prompt_lens)
    return [PoolingRequest(i, task, torch.randn(n, hidden_size, generator=gen))
            for i, (n, task) in enumerate(zip(prompt_lens, tasks))]


def random_requests(rng: random.Random, num_reqs: int, *, mixed_tasks: bool, hidden_size: int = 8) -> list[PoolingRequest]:
    lens = [rng.choice([1, 1, 2, 3, rng.randrange(1, 40)]) for _ in range(num_reqs)]
    tasks = [rng.choice((*TOKEN_TASKS, SEQ_TASK)) if mixed_tasks else "token_embed" for _ in range(num_reqs)]
    return make_requests(lens, hidden_size, tasks=tasks, seed=rng.randrange(2**31))


@dataclass
class PoolingStep:
    """One engine step: the flat hidden states of the scheduled tokens and the metadata describing them."""

    hidden_states: torch.Tensor  # [num_tokens, hidden] device: a view of the runner's persistent buffer
    metadata: PoolingMetadata
    requests: list[PoolingRequest]  # in batch order


class PoolingRun:
    """A miniature engine loop for pooling requests.

    Each step the scheduler gives every unfinished request a chunk of its prompt
    (the whole prompt without chunked prefill), the "model" writes those tokens'
    hidden states into a persistent buffer, and the pooler gets a view of it. The
    next step's forward overwrites the buffer (:meth:`overwrite_buffer`), so a
    chunk a pooler keeps must own its storage.
    """

    def __init__(self, requests: list[PoolingRequest], *, chunked: bool, rng: random.Random | None = None,
                 token_budget: int | None = None, device: DeviceLike | None = None) -> None:
        self.requests, self.chunked, self.rng = requests, chunked, rng or random.Random(0)
        total = sum(r.prompt_len for r in requests)
        self.token_budget = token_budget or max(1, total)
        hidden_size = requests[0].prompt_hidden.shape[1] if requests else 8
        self.buffer = to_device(torch.zeros(max(total, 1), hidden_size), device)  # [max_tokens, hidden] device
        self.device = device

    def _schedule(self) -> dict[int, int]:
        """Tokens per request this step: chunks of random size under the budget (chunked prefill)."""
        left, scheduled = self.token_budget, {}
        for req in self.requests:
            remaining = req.prompt_len - req.num_computed_tokens
            if remaining == 0 or left == 0:
                continue
            if not self.chunked:
                scheduled[req.req_id] = remaining
                continue
            chunk = min(remaining, left, self.rng.choice([remaining, remaining, self.rng.randrange(1, remaining + 1)]))
            scheduled[req.req_id] = chunk
            left -= chunk
        return scheduled

    def steps(self) -> Iterator[PoolingStep]:
        while not all(r.finished for r in self.requests):
            scheduled = self._schedule()
            batch = [r for r in self.requests if r.req_id in scheduled]
            num_scheduled = torch.tensor([scheduled[r.req_id] for r in batch], dtype=torch.int64)  # [num_reqs] host
            chunks = [r.prompt_hidden[r.num_computed_tokens:r.num_computed_tokens + scheduled[r.req_id]] for r in batch]
            num_tokens = int(num_scheduled.sum())
            self.buffer[:num_tokens].copy_(torch.cat(chunks))  # the forward pass writes its output buffer
            for r in batch:
                r.num_computed_tokens += scheduled[r.req_id]
            yield PoolingStep(mark_like(self.buffer[:num_tokens], self.buffer),
                              build_metadata(batch, num_scheduled, self.device), batch)

    def overwrite_buffer(self) -> None:
        """What the next forward does to the hidden-states buffer: write over it."""
        self.buffer.fill_(POISON)


def build_metadata(batch: list[PoolingRequest], num_scheduled: torch.Tensor,
                   device: DeviceLike | None = None) -> PoolingMetadata:
    """The runner's ``PoolingMetadata`` for a step (requests already advanced by this step)."""
    meta = PoolingMetadata(
        prompt_lens=torch.tensor([r.prompt_len for r in batch], dtype=torch.int64).reshape(len(batch)),
        pooling_params=[PoolingParams(r.task) for r in batch],
        pooling_states=[r.state for r in batch],
    )
    seq_lens = torch.tensor([r.num_computed_tokens for r in batch], dtype=torch.int64).reshape(len(batch))
    meta.build_pooling_cursor(num_scheduled.reshape(len(batch)), seq_lens, device)
    return meta


def describe_step(step: PoolingStep) -> str:
    """A table of one step as the pooler sees it: where each request's rows are, on the device and the host."""
    cursor = step.metadata.get_pooling_cursor()
    first, last = cursor.first_token_indices_gpu.tolist(), cursor.last_token_indices_gpu.tolist()  # display only
    rows = [f"hidden_states: {list(step.hidden_states.shape)}  (rows = scheduled tokens of the whole batch)",
            f"{'request':>8} {'task':>15} | {'first (gpu)':>11} {'last (gpu)':>10} | "
            f"{'scheduled (cpu)':>15} {'prompt_len':>10} {'seq_len':>7} {'finished':>8}"]
    for i, req in enumerate(step.requests):
        rows.append(f"{i:>8} {req.task:>15} | {first[i]:>11} {last[i]:>10} | "
                    f"{int(cursor.num_scheduled_tokens_cpu[i]):>15} {int(cursor.prompt_lens_cpu[i]):>10} "
                    f"{int(cursor.seq_lens_cpu[i]):>7} {str(cursor.finished_mask[i]):>8}")
    return "\n".join(rows)


def make_dispatcher(all_pool: AllPoolClass, *, chunked: bool, async_scheduling: bool,
                    slice_groups: bool) -> DispatchPooler:
    """vLLM's ``DispatchPooler.for_seq_cls`` shape: token tasks to ALL pooling, ``classify`` to last-token."""
    pool = all_pool(enable_chunked_prefill=chunked, async_scheduling=async_scheduling)
    last = LastPool(enable_chunked_prefill=chunked, async_scheduling=async_scheduling)
    return DispatchPooler({**{t: pool for t in TOKEN_TASKS}, SEQ_TASK: last}, slice_groups=slice_groups)


# ----------------------------------------------------------------------------- running a workload under check


def _describe(t: Any) -> str:
    """What an output is, whatever the reader returned: a tensor's shape, else its type and value."""
    if t is None:
        return "None"
    if isinstance(t, torch.Tensor):
        return f"tensor of shape {list(t.shape)}"
    text = repr(t)
    return f"{type(t).__name__} {text if len(text) <= 60 else text[:57] + '...'} (not a tensor)"


def _same(got: torch.Tensor | None, want: torch.Tensor | None) -> bool:
    if got is None or want is None:
        return got is None and want is None
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return False
    return torch.equal(got.detach().cpu(), want)


def _expect_outputs(outputs: PoolerOutput, step: PoolingStep, case: str, when: str) -> None:
    expect(isinstance(outputs, list), "forward must return a list (one item per request)",
           got=type(outputs).__name__, case=case)
    expect_equal(len(outputs), len(step.requests), what="number of outputs", case=case,
                 hint="one item per request of the batch, in batch order")
    for pos, (got, req) in enumerate(zip(outputs, step.requests)):
        want = req.expected_output() if req.finished else None
        if _same(got, want):
            continue
        hint = ("an unfinished request gives None; a finished one gives all of its prompt's hidden states, "
                "concatenated across chunks")
        if want is None:
            hint = "this request's prompt is not complete yet: its item must be None itself (not [] or an empty tensor)"
        elif not isinstance(got, torch.Tensor):
            hint = "a finished request gives one tensor [num_prompt_tokens, hidden]: its hidden states"
        if want is not None and isinstance(got, torch.Tensor) and got.shape == want.shape:
            if (got.detach().cpu() == POISON).any():
                hint = ("the output holds values the NEXT step wrote into the hidden-states buffer: a chunk kept "
                        "across steps (or, under async scheduling, a finished output) must be .clone()d")
            else:
                hint = ("right shape, wrong values. If this prompt came in several chunks, a kept chunk is probably "
                        "a view of the hidden-states buffer, which every step's forward overwrites: .clone() it. "
                        "Otherwise, check which rows you sliced and the order of the chunks")
        raise CheckFailed(f"wrong output for request {pos} of the batch ({req.task}, {when})",
                          expected=_describe(want) + (" equal to the prompt's hidden states" if want is not None else ""),
                          got=_describe(got) + (" with different values" if isinstance(got, torch.Tensor)
                                                and want is not None and got.shape == want.shape else ""),
                          case=case, hint=hint)


def run_workload(all_pool: AllPoolClass, requests: list[PoolingRequest], *, chunked: bool, async_scheduling: bool,
                 slice_groups: bool, overwrite: bool, case: str, rng: random.Random,
                 token_budget: int | None = None, check_clean: bool = False) -> None:
    """Drive ``requests`` through the engine loop with the reader's pooler, checking every step's outputs.

    Without async scheduling the runner reads the outputs before the next forward,
    so they are checked right away; with it, only after the buffer was overwritten.
    """
    dispatcher = make_dispatcher(all_pool, chunked=chunked, async_scheduling=async_scheduling,
                                 slice_groups=slice_groups)
    run = PoolingRun(requests, chunked=chunked, rng=rng, token_budget=token_budget)
    for step_no, step in enumerate(run.steps()):
        outputs = dispatcher(step.hidden_states, step.metadata)
        if not async_scheduling:
            _expect_outputs(outputs, step, case, f"step {step_no}")
        if overwrite:
            run.overwrite_buffer()
        if async_scheduling:
            _expect_outputs(outputs, step, case, f"step {step_no}, read after the next step's forward")
        for pos, req in enumerate(step.requests if check_clean else []):
            if req.finished and req.task in TOKEN_TASKS:
                expect_equal(len(req.state.hidden_states_cache), 0,
                             what=f"cached chunks of request {pos} after it finished", case=f"{case}, step {step_no}",
                             hint="call state.clean() once a finished request's output is built: the cache "
                                  "would otherwise grow with every request the engine ever served")


# ----------------------------------------------------------------------------- checks shared by 1.1 and 1.2


def _fixed_cases(slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        def go(lens: list[int], case: str, *, tasks: list[str] | None = None, chunked: bool = False,
               budget: int | None = None) -> None:
            run_workload(all_pool, make_requests(lens, tasks=tasks), chunked=chunked, async_scheduling=False,
                         slice_groups=slice_groups, overwrite=False, case=case, rng=random.Random(0),
                         token_budget=budget)

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
            num_reqs = rng.choice([0, 1, 2, rng.randrange(1, 20), rng.randrange(1, 257)])
            chunked, mixed, async_sched = rng.random() < 0.6, rng.random() < 0.5, rng.random() < 0.3
            requests = random_requests(rng, num_reqs, mixed_tasks=mixed)
            budget = rng.randrange(1, 64) if chunked else None
            case = (f"random batch #{trial}: {num_reqs} requests, chunked prefill {chunked}, mixed tasks {mixed}, "
                    f"async scheduling {async_sched}")
            run_workload(all_pool, requests, chunked=chunked, async_scheduling=async_sched,
                         slice_groups=slice_groups, overwrite=False, case=case, rng=rng, token_budget=budget)

    return run


def _check_empty(all_pool: AllPoolClass, rng: random.Random) -> None:
    for chunked in (False, True):
        meta = build_metadata([], torch.zeros(0, dtype=torch.int64))
        hidden = to_device(torch.zeros(0, 8))  # [0, hidden] device
        out = all_pool(enable_chunked_prefill=chunked)(hidden, meta)
        expect(isinstance(out, list) and out == [], "an empty batch must give an empty list",
               expected=[], got=out, case=f"0 requests, chunked prefill {chunked}",
               hint="there is no first request to read a bound from: return [] before touching the cursor")


def _check_buffer_reuse(slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        run_workload(all_pool, make_requests([9, 4, 7]), chunked=True, async_scheduling=False,
                     slice_groups=slice_groups, overwrite=True, rng=random.Random(0), token_budget=5,
                     case="chunked prefill, the buffer overwritten after every step")
        run_workload(all_pool, make_requests([3, 1, 4]), chunked=False, async_scheduling=True,
                     slice_groups=slice_groups, overwrite=True, rng=random.Random(0),
                     case="async scheduling: outputs read after the next step's forward (no chunking)")
        run_workload(all_pool, make_requests([6, 2, 5]), chunked=True, async_scheduling=True,
                     slice_groups=slice_groups, overwrite=True, rng=random.Random(0), token_budget=4,
                     case="async scheduling with chunked prefill")
        for trial in range(10):
            async_sched = rng.random() < 0.5
            run_workload(all_pool, random_requests(rng, rng.randrange(1, 40), mixed_tasks=True), chunked=True,
                         async_scheduling=async_sched, slice_groups=slice_groups, overwrite=True, rng=rng,
                         token_budget=rng.randrange(1, 32),
                         case=f"random chunked run #{trial} with the buffer overwritten, async scheduling {async_sched}")

    return run


def _check_cleaned(slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        run_workload(all_pool, make_requests([6, 3, 5]), chunked=True, async_scheduling=False,
                     slice_groups=slice_groups, overwrite=False, rng=random.Random(0), token_budget=5,
                     check_clean=True, case="chunked prefill: 14 tokens through a budget of 5 per step")
        for trial in range(5):
            run_workload(all_pool, random_requests(rng, rng.randrange(1, 30), mixed_tasks=True), chunked=True,
                         async_scheduling=rng.random() < 0.5, slice_groups=slice_groups, overwrite=False, rng=rng,
                         token_budget=rng.randrange(1, 32), check_clean=True, case=f"random chunked run #{trial}")

    return run


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _check_no_needless_copies(slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        for chunked in (False, True):
            requests = make_requests([3, 1, 4])
            step = next(PoolingRun(requests, chunked=chunked).steps())
            dispatcher = make_dispatcher(all_pool, chunked=chunked, async_scheduling=False, slice_groups=slice_groups)
            outputs = dispatcher(step.hidden_states, step.metadata)
            copied = [i for i, o in enumerate(outputs)
                      if isinstance(o, torch.Tensor) and not _shares_storage(o, step.hidden_states)]
            expect(not copied, f"outputs {copied} are copies", case=f"one step, chunked prefill {chunked}, "
                   "no async scheduling", expected="views into hidden_states (the runner copies them to the host "
                   "before the next forward)", got=f"{len(copied)} of {len(outputs)} outputs in new memory",
                   hint="clone only what must outlive the step: unfinished chunks, and finished outputs under "
                        "async scheduling; a single chunk is returned as it is, not through torch.cat")

    return run


def _sync_bound(limit: int, slice_groups: bool) -> Callable[[AllPoolClass, random.Random], None]:
    def run(all_pool: AllPoolClass, rng: random.Random) -> None:
        for num_reqs in (1, 16, 64):
            requests = random_requests(rng, num_reqs, mixed_tasks=False)
            step = next(PoolingRun(requests, chunked=True, rng=rng, token_budget=10 * num_reqs).steps())
            dispatcher = make_dispatcher(all_pool, chunked=True, async_scheduling=False, slice_groups=slice_groups)
            with count_syncs() as report:
                dispatcher(step.hidden_states, step.metadata)
            where = "; ".join(f"{e.kind.value} at {e.where}" for e in report.events[:4])
            expect(report.count <= limit, f"{report.count} syncs in one call for {num_reqs} requests",
                   expected=f"at most {limit}", got=f"{report.count}: {where}", case=f"{num_reqs} requests",
                   hint="read the sub-group's two bounds once, then split by num_scheduled_tokens_cpu (host)"
                   if limit else "the sizes are on the host (num_scheduled_tokens_cpu): split by them alone")

    return run


# ----------------------------------------------------------------------------- Exercise 1.1


CHECKS_1_1 = [
    Check("1.1", "same outputs as the reference on fixed cases (sub-groups, chunked prefill)", _fixed_cases(False)),
    Check("1.1", "empty batch gives []", _check_empty),
    Check("1.1", "same outputs on random batches (0 to 256 requests, chunked, mixed tasks)", _random_cases(False)),
    Check("1.1", "a finished request's cache is cleaned", _check_cleaned(False)),
    Check("1.1", "chunks kept across steps survive the next step's forward", _check_buffer_reuse(False)),
    Check("1.1", "no needless copies without async scheduling", _check_no_needless_copies(False)),
    Check("1.1", "at most 2 syncs per call, whatever the batch size", _sync_bound(2, False), timeout_s=60),
]


def check_all_pool(all_pool: AllPoolClass, seed: int | None = None) -> CheckReport:
    """Exercise 1.1: ``all_pool`` is the reader's ``AllPool`` class, called as vLLM's DispatchPooler did at #41163."""
    return run_checks("Exercise 1.1 — AllPool.forward (slice, then split)", CHECKS_1_1, all_pool, seed=seed)


# ----------------------------------------------------------------------------- Exercise 1.2 (stretch)


def _check_rejects_unsliced(all_pool: AllPoolClass, rng: random.Random) -> None:
    requests = make_requests([2, 3, 4], tasks=[SEQ_TASK, "token_embed", "token_embed"])
    step = next(PoolingRun(requests, chunked=False).steps())
    group = step.metadata[1:]  # the ALL-pooling sub-group, handed the WHOLE batch's rows (9, not 7)
    try:
        outputs = all_pool(enable_chunked_prefill=False)(step.hidden_states, group)
    except ValueError:
        return
    except NotImplementedError:
        raise
    except RuntimeError as exc:
        raise CheckFailed("torch raised before your code did", expected="ValueError naming the invariant",
                          got=f"RuntimeError: {str(exc)[:80]}", case="9 rows for a sub-group of 7 tokens",
                          hint="compare hidden_states.shape[0] with the sizes' sum yourself: shapes are host "
                               "metadata, so the test costs no sync") from None
    raise CheckFailed("hidden states whose rows do not match the sizes were split anyway",
                      expected="ValueError", got=f"{len(outputs)} outputs, silently misaligned",
                      case="9 rows for a sub-group of 7 tokens",
                      hint="splitting by host sizes is only right when the caller sliced the sub-group's rows; "
                           "check rows == sum(sizes) and raise ValueError otherwise")


def _check_split_alone(all_pool: AllPoolClass, rng: random.Random) -> None:
    for trial in range(10):
        num_reqs = rng.choice([1, 2, rng.randrange(1, 65)])
        requests = random_requests(rng, num_reqs, mixed_tasks=False)
        step = next(PoolingRun(requests, chunked=False, rng=rng).steps())
        case = f"split_hidden_states alone, {num_reqs} requests of {[r.prompt_len for r in requests][:6]}... tokens"
        chunks = all_pool(enable_chunked_prefill=False).split_hidden_states(
            step.hidden_states, step.metadata.get_pooling_cursor())
        expect_equal(len(chunks), num_reqs, what="number of chunks", case=case)
        for i, (chunk, req) in enumerate(zip(chunks, requests)):
            expect(_same(chunk, req.prompt_hidden), f"chunk {i} is not request {i}'s rows", case=case,
                   expected=_describe(req.prompt_hidden), got=_describe(chunk),
                   hint="split by cursor.num_scheduled_tokens_cpu, in batch order")
            expect(_shares_storage(chunk, step.hidden_states), f"chunk {i} is a copy", case=case,
                   hint="split() returns views; copying is forward()'s decision, not the split's")


CHECKS_1_2 = [
    Check("1.2", "split_hidden_states alone: one view per request", _check_split_alone),
    Check("1.2", "same outputs on fixed cases, through the slicing dispatcher", _fixed_cases(True)),
    Check("1.2", "empty batch gives []", _check_empty),
    Check("1.2", "same outputs on random batches", _random_cases(True)),
    Check("1.2", "a finished request's cache is cleaned", _check_cleaned(True)),
    Check("1.2", "chunks kept across steps survive the next step's forward", _check_buffer_reuse(True)),
    Check("1.2", "no needless copies without async scheduling", _check_no_needless_copies(True)),
    Check("1.2", "rows that do not match the sizes raise ValueError", _check_rejects_unsliced),
    Check("1.2", "0 syncs per call", _sync_bound(0, True), timeout_s=60),
]


def check_all_pool_no_sync(all_pool: AllPoolClass, seed: int | None = None) -> CheckReport:
    """Exercise 1.2: the zero-sync ``AllPool``, called by a dispatcher that slices each sub-group's rows."""
    return run_checks("Exercise 1.2 — AllPool with 0 syncs", CHECKS_1_2, all_pool, seed=seed)


# ----------------------------------------------------------------------------- profiling helpers

BATCH_SIZES = (1, 4, 16, 64, 256)
PROFILE_TOKENS = 16  # tokens per request
PROFILE_HIDDEN = 1024


def profile_batch(num_reqs: int, device: DeviceLike | None = None) -> PoolingStep:
    """One step of ``num_reqs`` whole prompts of ``PROFILE_TOKENS`` tokens, a single task (one sub-group)."""
    requests = make_requests([PROFILE_TOKENS] * num_reqs, PROFILE_HIDDEN, seed=num_reqs)
    return next(PoolingRun(requests, chunked=False, device=device or pick_device()).steps())


def _call(all_pool: AllPoolClass, num_reqs: int) -> Callable[[], PoolerOutput]:
    # chunked prefill off: its branch is the same in every version, the split is what changed
    step, pool = profile_batch(num_reqs), all_pool(enable_chunked_prefill=False)
    return lambda: pool(step.hidden_states, step.metadata)


def sync_counts(impls: dict[str, AllPoolClass], batch_sizes: tuple[int, ...] = BATCH_SIZES) -> dict[str, list[int]]:
    """Syncs per ``forward`` call of each version at each batch size (counted: the same on any machine)."""
    counts: dict[str, list[int]] = {}
    for name, all_pool in impls.items():
        counts[name] = []
        for n in batch_sizes:
            call = _call(all_pool, n)
            with count_syncs() as report:
                call()
            counts[name].append(report.count)
    record("ch1", "sync_counts", {"batch_sizes": list(batch_sizes), "counts": counts})
    return counts


declare("ch1.timing",
        cpu=("On this CPU, #41163 and the stretch are each at least 3× faster than the baseline from 16 requests up.",
             [Faster(fast=1, slow=0, by=3.0, from_value=16), Faster(fast=2, slow=0, by=3.0, from_value=16)]),
        gpu=("On a GPU, #41163 and the stretch are each at least 1.5× faster than the baseline from 16 requests up.",
             [Faster(fast=1, slow=0, by=1.5, from_value=16), Faster(fast=2, slow=0, by=1.5, from_value=16)]))


def timing_sweep(impls: dict[str, AllPoolClass], batch_sizes: tuple[int, ...] = BATCH_SIZES) -> Sweep:
    """Median time of one ``forward`` call per version and batch size; every result checked against the first."""
    variants = {name: (lambda n, cls=cls: _call(cls, n)) for name, cls in impls.items()}
    result = validated("ch1.timing", lambda: sweep(variants, "batch size", batch_sizes,
                                                   min_run_time=run_time(0.1, 0.5), reference=next(iter(impls))))
    record("ch1", "timing", result.to_dict())
    return result


def profile_calls(impls: dict[str, AllPoolClass], batch_size: int = 16) -> dict[str, Trace]:
    """One profiled ``forward`` call per version, ready for ``timeline_figure``."""
    traces = {name: profile(_call(cls, batch_size), warmup=2) for name, cls in impls.items()}
    record("ch1", "profile", {name: {"duration_us": t.duration_us, "host_syncs": t.count("sync")}
                              for name, t in traces.items()})
    return traces


# PR #41163's description: median of a method-level benchmark of AllPool.forward (batch and GPU not stated).
PR_MEDIAN_BEFORE_US, PR_MEDIAN_AFTER_US = 59.89, 39.65


def compare_with_pr(timings: Sweep) -> str:
    """The PR's before/after ratio beside the ratios of ``timings`` (baseline first, then the other versions)."""
    baseline, *others = list(timings.timings)
    lines = [f"PR #41163 (its description, method-level benchmark): {PR_MEDIAN_BEFORE_US} us -> "
             f"{PR_MEDIAN_AFTER_US} us, {PR_MEDIAN_BEFORE_US / PR_MEDIAN_AFTER_US:.2f}x",
             f"measured on {timings.provenance.label}, baseline time / version time:",
             f"{timings.parameter:>12} " + " ".join(f"{name:>26}" for name in others)]
    for i, value in enumerate(timings.values):
        ratios = [timings.ratio(baseline, name)[i] for name in others]
        lines.append(f"{value!s:>12} " + " ".join(f"{r:>25.2f}x" for r in ratios))
    return "\n".join(lines)


def speedup_figure(timings: Sweep) -> go.Figure:
    """Speed-up of each version over the baseline per batch size, the PR's own figure as a dashed line."""
    return figures.speedup_figure(timings, "AllPool.forward: speed-up over the baseline",
                  {"PR #41163, method benchmark (from the PR)": PR_MEDIAN_BEFORE_US / PR_MEDIAN_AFTER_US})
