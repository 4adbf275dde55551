"""Chapter 4: what the chapter runs: the inputs, the batches and steps, the runs the checks and the profiles share.

A room of :mod:`synclab.reverse_scan` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, TypedDict

import torch

from synclab.answer_keys.runners import runs_with_the_answer
from synclab.device import mark_device
from synclab.dispatch import CountingList, plain_list
from synclab.engine.input_batch import CachedRequestState, InputBatch, PLACEHOLDER
from synclab.engine.input_batch_baseline import InputBatchBaseline
from synclab.sim import cuda as sim_cuda
from synclab.syncs import SyncKind, count_syncs


BatchClass = type[InputBatch]


# ----------------------------------------------------------------------------- building a step


class ReadyEvent:
    """An event whose copy has already landed: for examples and host-only benchmarks (no device to wait for)."""

    def synchronize(self) -> None:
        pass


def build_step(batch_cls: BatchClass, outputs: list[list[int]], sampled: list[list[int]], rows: list[int | None],
               event: Any, history_needed: bool = True, counting: bool = False
               ) -> tuple[InputBatch, list[CachedRequestState]]:
    """A batch whose requests hold ``outputs`` and whose last step sampled ``sampled`` (rows ``rows``; None: new)."""
    batch = batch_cls()
    make = CountingList if counting else list  # counting: the checks' histories, counted whatever reads them
    states = [CachedRequestState(f"req-{i}", [1, 2, 3], make(ids)) for i, ids in enumerate(outputs)]
    for state in states:
        batch.add_request(state)
    if not history_needed:  # no sampler feature reads the history: vLLM passes an empty list
        batch.sampling_metadata.output_token_ids = []
    batch.prev_req_id_to_index = {s.req_id: row for s, row in zip(states, rows) if row is not None}
    width = max((len(r) for r in sampled), default=1)
    padded = [r + [PLACEHOLDER] * (width - len(r)) for r in sampled] or [[PLACEHOLDER]]
    sampled_cpu = torch.tensor(padded, dtype=torch.int64)  # [num_rows, width]
    if isinstance(event, sim_cuda.SimEvent):
        # As the runner hands them over: a non-blocking copy from the device, then the event. Until the
        # event is waited on, the host tensor holds garbage, so reading it early shows.
        sampled_cpu = sim_cuda.copy_to_host_async(mark_device(sampled_cpu))
        event.record()
    batch.set_async_sampled_token_ids(sampled_cpu, event)
    return batch, states


def random_step(rng: random.Random, num_reqs: int, max_len: int = 40, max_spec: int = 3, strays: bool = True
                ) -> tuple[list[list[int]], list[list[int]], list[int | None]]:
    """Outputs with 0 to 1+max_spec trailing placeholders, last step's rows (shuffled, -1 padded), new requests."""
    width = 1 + rng.randint(0, max_spec)
    outputs, rows = [], []
    order = list(range(num_reqs))
    rng.shuffle(order)
    for i in range(num_reqs):
        history = [rng.randrange(1000) for _ in range(rng.randint(0, max_len))]
        if strays and history and rng.random() < 0.1:
            history[rng.randrange(len(history))] = PLACEHOLDER  # a stray -1 inside the history
        placeholders = rng.choice([0, 1, width, rng.randint(1, width + 1)])
        outputs.append(history + [PLACEHOLDER] * placeholders)
        rows.append(None if rng.random() < 0.1 else order[i])
    sampled = []
    for _ in range(num_reqs):
        accepted = rng.randint(0, width)
        sampled.append([rng.randrange(1000) for _ in range(accepted)] + [PLACEHOLDER] * (width - accepted))
    return outputs, sampled, rows


class StepOutcome(TypedDict):
    """One repair as plain data: everything a check of Exercise 4.1 compares."""

    outputs: list[list[Any]]  # each request state's list after the step, its elements as they are
    in_batch: list[list[Any]]  # the list the batch holds for each request (what the sampler reads)
    shared: list[bool]  # whether the batch still holds each request state's own list object
    syncs: int  # syncs counted during the step
    waits: int  # waits on the step's event
    device_waits: int  # waits for the whole device or a stream: they also wait for the forward just queued
    touched_by_op: dict[str, int]  # history elements read, by the list operation that read them


@runs_with_the_answer
def step_outcome(batch_cls: BatchClass, outputs: list[list[int]], sampled: list[list[int]],
                 rows: list[int | None], history_needed: bool = True, in_flight: bool = True) -> StepOutcome:
    """One repair by ``batch_cls`` under simulated CUDA, as plain data (:class:`StepOutcome`): the only way the
    checks run the reader's batch. ``in_flight=False``: no step is in flight (``sampled_token_ids_cpu`` is None).

    A runner (:mod:`synclab.answer_keys.runners`): handed an answer held in another process (the grader judges
    Exercise 4.1 apart), the step runs there, and only its outcome comes back."""
    CountingList.touched, CountingList.by_op = 0, Counter()
    with sim_cuda.simulated_cuda() as device, count_syncs(simulate=True) as report:
        event = torch.cuda.Event() if in_flight else None
        if event is not None:
            event.record()
        batch, states = build_step(batch_cls, [list(o) for o in outputs], sampled, rows, event, history_needed,
                                   counting=True)
        before = [s.output_token_ids for s in states]
        if not in_flight:
            batch.set_async_sampled_token_ids(None, None)  # type: ignore[arg-type]
        batch.update_async_output_token_ids()
    touched = dict(CountingList.by_op)  # read before the copies below, which read every element themselves
    held = list(batch.sampling_metadata.output_token_ids)
    return StepOutcome(
        outputs=[plain_list(s.output_token_ids) for s in states],  # after `touched`: these reads are not the answer's
        in_batch=[plain_list(ids) for ids in held],
        shared=[i < len(held) and held[i] is ids for i, ids in enumerate(before)],
        syncs=report.count, waits=sum(op == "host waits" for op in device.log.ops()),
        device_waits=sum(e.kind in (SyncKind.DEVICE_SYNC, SyncKind.STREAM_SYNC) for e in report.events),
        touched_by_op=touched)


# Chapter 4's picture: one speculative request over a step. Its history, then the sampled token's placeholder and
# one per draft (2 drafts), the row the device sends back (the sampled token and 1 accepted draft; the rejected
# draft's slot padded with -1), and the list once repaired.
EXAMPLE_HISTORY, EXAMPLE_DRAFTS, EXAMPLE_ROW = [5, 6], 2, [7, 8, PLACEHOLDER]


def speculative_example(batch_cls: BatchClass | None = None) -> list[tuple[str, list[int], int]]:
    """The three moments of chapter 4's picture, each ``(what, the list or row, how many of its ids are history)``;
    the repair is ``batch_cls``'s
    (by default the code before the PR, whose answer is the same: only its cost differs)."""
    scheduled = EXAMPLE_HISTORY + [PLACEHOLDER] * (1 + EXAMPLE_DRAFTS)
    batch, states = build_step(batch_cls or InputBatchBaseline, [list(scheduled)], [EXAMPLE_ROW], [0], ReadyEvent())
    batch.update_async_output_token_ids()
    history = len(EXAMPLE_HISTORY)
    return [("1. scheduled: a placeholder for the sampled token and one per draft", scheduled, history),
            ("2. the device's row: the sampled token, 1 draft accepted, -1 for the rejected one", list(EXAMPLE_ROW), 0),
            ("3. repaired: the trailing placeholders replaced; the list shrinks by the rejected draft",
             list(states[0].output_token_ids), history)]
