"""Chapter 1 (slice-then-split): what the chapter runs: the inputs, the batches and steps, the runs the checks and the profiles share.

A room of :mod:`synclab.slice_then_split` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch

from synclab.device import DeviceLike, has_cuda, mark_like, pick_device, to_device
from synclab.engine.pool_metadata import PoolingMetadata, PoolingParams, PoolingStates
from synclab.engine.pooler import DispatchPooler, LastPool, TokenPoolingMethod


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


def random_request_spec(rng: random.Random, num_reqs: int, *, mixed_tasks: bool) -> dict:
    """What :func:`random_requests` draws, as data: the prompts' lengths, their tasks and the seed of their hidden
    states (:func:`requests_of` makes the requests again, in any process)."""
    lens = [rng.choice([1, 1, 2, 3, rng.randrange(1, 40)]) for _ in range(num_reqs)]
    tasks = [rng.choice((*TOKEN_TASKS, SEQ_TASK)) if mixed_tasks else "token_embed" for _ in range(num_reqs)]
    return {"lens": lens, "tasks": tasks, "seed": rng.randrange(2**31)}


def requests_of(spec: dict, hidden_size: int = 8) -> list[PoolingRequest]:
    """The requests a spec of :func:`random_request_spec`'s shape names (``tasks`` None: all ``token_embed``)."""
    return make_requests(spec["lens"], hidden_size, tasks=spec.get("tasks"), seed=spec.get("seed", 0))


def random_requests(rng: random.Random, num_reqs: int, *, mixed_tasks: bool, hidden_size: int = 8) -> list[PoolingRequest]:
    return requests_of(random_request_spec(rng, num_reqs, mixed_tasks=mixed_tasks), hidden_size)


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


# ----------------------------------------------------------------------------- the clone rule (scaffolding for 1.1)


def kept_chunk(chunk: torch.Tensor, *, finished: bool, first_chunk: bool, clone_finished: bool) -> torch.Tensor:
    """A request's chunk [num_scheduled, hidden] as ``AllPool`` may keep or return it: a view, or a clone.

    Scaffolding that Exercise 1.1 hands the reader, so that 1.1's effort goes to the slice and
    the split: the chunk is a view of the hidden-states buffer, which the next forward
    overwrites, so it must own its storage when it outlives this step. That is an unfinished
    request's chunk (kept for later steps), and under async scheduling (``clone_finished``)
    a finished request's only chunk (read after the next forward may have run). A finished
    request's later chunk stays a view: ``torch.cat`` of its chunks makes new storage. Without
    chunked prefill every request is finished with its only chunk.
    """
    must_own = (not finished) or (clone_finished and first_chunk)
    return chunk.clone() if must_own else chunk


# ----------------------------------------------------------------------------- PR #41163's benchmark batch (the checks and the profiles share it)


# PR #41163's own benchmark (its description): 64 whole prompts of 128 tokens, all `classify` but for a
# `token_classify` sub-group of 32 requests starting at request 16, hidden size 4096, bfloat16 on a GPU,
# 500 warm-up and 4,000 timed calls, 5 repeats, medians.
PR_NUM_REQS, PR_TOKENS, PR_GROUP_OFFSET, PR_GROUP_SIZE, PR_HIDDEN = 64, 128, 16, 32, 4096


HOST_WORK_RATIO = 1.5  # 1.1's host calls for 48 requests against 8: at most this factor


def benchmark_dtype() -> torch.dtype:
    """The PR's bfloat16 on a GPU; float32 on a CPU, where bfloat16 kernels are not what a GPU runs."""
    return torch.bfloat16 if has_cuda() else torch.float32


def pr_benchmark_batch(group_size: int = PR_GROUP_SIZE, hidden_size: int = PR_HIDDEN,
                       device: DeviceLike | None = None) -> tuple[torch.Tensor, PoolingMetadata]:
    """PR #41163's benchmark batch: the whole batch's hidden states and the ALL-pooling sub-group's metadata.

    64 whole prompts of 128 tokens; requests ``16 .. 16 + group_size`` are ``token_classify``
    (ALL pooling), the others ``classify``. What ``DispatchPooler`` handed ``AllPool`` at
    #41163: every row of the batch, and a cursor sliced to the sub-group (its device
    indices are positions in the whole batch). Every prompt completes this step.
    """
    if not 1 <= group_size <= PR_NUM_REQS - PR_GROUP_OFFSET:
        raise ValueError(f"a sub-group of 1 to {PR_NUM_REQS - PR_GROUP_OFFSET} requests fits after offset "
                         f"{PR_GROUP_OFFSET}, not {group_size}")
    device = device or pick_device()
    tasks = [SEQ_TASK] * PR_NUM_REQS
    tasks[PR_GROUP_OFFSET:PR_GROUP_OFFSET + group_size] = ["token_classify"] * group_size
    lens = torch.full((PR_NUM_REQS,), PR_TOKENS, dtype=torch.int64)  # [num_reqs] host
    meta = PoolingMetadata(prompt_lens=lens, pooling_params=[PoolingParams(t) for t in tasks],
                           pooling_states=[PoolingStates() for _ in tasks])
    meta.build_pooling_cursor(lens, lens.clone(), device)  # whole prompts: seq_len == prompt_len
    gen = torch.Generator().manual_seed(group_size)
    # a random offset per row plus a random profile per column: every row differs from every other (a wrong
    # slice cannot pass the checks), at the cost of two small draws (a full randn of 33M values takes 0.2 s)
    rows = torch.randn(PR_NUM_REQS * PR_TOKENS, 1, generator=gen)  # [num_tokens, 1]
    columns = torch.randn(1, hidden_size, generator=gen)  # [1, hidden]
    hidden = (rows + columns).to(benchmark_dtype())  # [num_tokens, hidden]
    hidden_states = to_device(hidden, device)  # [num_tokens, hidden] device
    return hidden_states, meta[PR_GROUP_OFFSET:PR_GROUP_OFFSET + group_size]


def handed_to(all_pool: AllPoolClass, hidden_states: torch.Tensor,
              group: PoolingMetadata) -> tuple[torch.Tensor, PoolingMetadata]:
    """What the dispatcher hands ``all_pool`` for the sub-group of :func:`pr_benchmark_batch`.

    At #41163, every row of the batch and the sliced cursor. A pooler that declares
    ``receives_group_rows`` (Exercise 1.2, later vLLM) gets only its sub-group's rows,
    cut on the host, and the cursor rebased to them.
    """
    if not getattr(all_pool, "receives_group_rows", False):
        return hidden_states, group
    start = PR_GROUP_OFFSET * PR_TOKENS  # host arithmetic: the rows of the requests before the sub-group
    rows = hidden_states[start:start + int(group.get_pooling_cursor().num_scheduled_tokens_cpu.sum())]
    rebased = group[0:len(group)]
    rebased.pooling_cursor = group.get_pooling_cursor().shifted(start)
    return mark_like(rows, hidden_states), rebased
