"""``InputBatch.update_async_output_token_ids``: its edge cases, derived from vLLM's function at PR #42938.

No upstream unit test exists: ``tests/v1/worker/test_gpu_input_batch_perf.py`` was deleted
in #42938's review before merge (a 5 ms timing bound, judged flaky), so nothing here
translates it. The cases below are the edge cases of the function itself
(``vllm/v1/worker/gpu_input_batch.py`` at #42938; its body is unchanged on main in Aug 2026),
each written as an input and the lists vLLM's code leaves.

Under test: Exercise 4.1's ``ReverseScanBatch`` (the reverse scan #42938 introduced) and the
lab's ``InputBatchBaseline`` (the forward ``list.index(-1)`` before #42938), which must give
the same lists.
"""

from __future__ import annotations

import pytest
import torch

from synclab.engine.input_batch import CachedRequestState, InputBatch
from synclab.engine.input_batch_baseline import InputBatchBaseline
from tests.upstream.adapters import solution

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

BATCHES = [solution(4, "ReverseScanBatch"), InputBatchBaseline]


class CountingEvent:
    """Stands in for the CUDA event recorded after the sampled ids' host copy."""

    def __init__(self) -> None:
        self.waits = 0

    def synchronize(self) -> None:
        self.waits += 1


def _batch(cls: type[InputBatch], outputs: dict[str, list[int]], sampled: torch.Tensor,
           prev_rows: dict[str, int]) -> tuple[InputBatch, CountingEvent, list[CachedRequestState]]:
    """A batch of requests with these output lists, after a step whose host copy of sampled ids is ``sampled``."""
    batch = cls()
    states = [CachedRequestState(req_id, prompt_token_ids=[0], output_token_ids=ids) for req_id, ids in outputs.items()]
    for state in states:
        batch.add_request(state)
    batch.prev_req_id_to_index = prev_rows
    event = CountingEvent()
    batch.set_async_sampled_token_ids(sampled, event)
    return batch, event, states


def _repair(cls: type[InputBatch], output: list[int], sampled_row: list[int]) -> tuple[list[int], int]:
    """One request in row 0 of last step's ids: its list after the repair, and the number of waits."""
    sampled = torch.tensor([sampled_row], dtype=torch.int64).reshape(1, len(sampled_row))
    batch, event, states = _batch(cls, {"r": list(output)}, sampled, {"r": 0})  # a copy: params are shared
    batch.update_async_output_token_ids()
    assert batch.req_output_token_ids[0] is states[0].output_token_ids  # repaired in place, shared with the state
    return states[0].output_token_ids, event.waits


@pytest.mark.parametrize("cls", BATCHES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("output,sampled_row,expected", [
    pytest.param([5, -1], [7], [5, 7], id="one placeholder, one sampled id"),
    pytest.param([5, 6, -1, -1, -1], [7, 8, -1], [5, 6, 7, 8], id="fewer valid ids than placeholders (spec decode)"),
    pytest.param([5, -1, -1], [-1, -1], [5], id="row of all padding removes every trailing placeholder"),
    pytest.param([5, -1], [7, 8, 9], [5, 7], id="more valid ids than placeholders: cut to the placeholders"),
    pytest.param([5, -1, -1], [7, 8], [5, 7, 8], id="row with no -1 padding: all ids valid"),
    pytest.param([-1, -1], [7, -1, -1], [7], id="only placeholders in the list"),
])
def test_trailing_placeholders_are_replaced(cls: type[InputBatch], output: list[int], sampled_row: list[int],
                                            expected: list[int]) -> None:
    """The trailing -1s become the valid sampled ids (up to the row's first -1), at most one per placeholder."""
    repaired, waits = _repair(cls, output, sampled_row)
    assert repaired == expected
    assert waits == 1


@pytest.mark.parametrize("cls", BATCHES, ids=lambda c: c.__name__)
def test_empty_sampled_row_is_skipped(cls: type[InputBatch]) -> None:
    """An empty row of sampled ids leaves the list as it is (after the one wait that read it)."""
    repaired, waits = _repair(cls, [5, -1], [])
    assert repaired == [5, -1]
    assert waits == 1


@pytest.mark.parametrize("cls", BATCHES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("output", [[5, 6], [], [5, -1, 6]], ids=["no -1", "empty list", "-1 not trailing"])
def test_list_without_trailing_placeholder_is_skipped_without_waiting(cls: type[InputBatch],
                                                                      output: list[int]) -> None:
    """No trailing -1 (e.g. tokens discarded after a KV-load failure): untouched, and the host never waits."""
    repaired, waits = _repair(cls, output, [7])
    assert repaired == output
    assert waits == 0


@pytest.mark.parametrize("cls", BATCHES, ids=lambda c: c.__name__)
def test_new_request_is_skipped(cls: type[InputBatch]) -> None:
    """A request with no row last step (not in ``prev_req_id_to_index``) keeps its list; old ones are repaired."""
    sampled = torch.tensor([[7], [8]])
    batch, event, states = _batch(cls, {"old": [1, -1], "new": [-1]}, sampled, {"old": 1})
    batch.update_async_output_token_ids()
    assert [s.output_token_ids for s in states] == [[1, 8], [-1]]
    assert event.waits == 1


@pytest.mark.parametrize("cls", BATCHES, ids=lambda c: c.__name__)
def test_at_most_one_wait_per_step(cls: type[InputBatch]) -> None:
    """Several requests to repair, rows in a different order from the batch: one wait for all of them."""
    sampled = torch.tensor([[10, -1], [20, 21], [30, -1]])
    batch, event, states = _batch(cls, {"a": [1, -1], "b": [2, -1, -1], "c": [3, -1]}, sampled,
                                  {"a": 2, "b": 1, "c": 0})
    batch.update_async_output_token_ids()
    assert [s.output_token_ids for s in states] == [[1, 30], [2, 20, 21], [3, 10]]
    assert event.waits == 1


@pytest.mark.parametrize("cls", BATCHES, ids=lambda c: c.__name__)
def test_nothing_kept_when_no_sampler_feature_reads_the_history(cls: type[InputBatch]) -> None:
    """``set_async_sampled_token_ids`` keeps the ids only if ``output_token_ids`` is non-empty; else a no-op."""
    batch = cls()
    batch.sampling_metadata.output_token_ids = []  # no penalty, bad word or logits processor needs the history
    batch.set_async_sampled_token_ids(torch.tensor([[7]]), CountingEvent())
    assert batch.sampled_token_ids_cpu is None and batch.async_copy_ready_event is None
    batch.update_async_output_token_ids()  # returns at once: nothing to repair, nothing to wait on
