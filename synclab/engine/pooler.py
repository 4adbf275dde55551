"""Token-wise pooling as vLLM runs it: the pooling methods and the ``DispatchPooler`` that calls them.

Taught in chapter 1 (slice-then-split). Mirrors
``vllm/model_executor/layers/pooler/tokwise/methods.py`` and ``.../pooler/special.py``
in the lab's own code:

* :class:`TokenPoolingMethod` — what every pooling method is given, and the
  scheduler settings it reads (chunked prefill, async scheduling);
* :class:`LastPool` — a sequence-wise pooler (last token), so batches can mix tasks;
* :class:`SequencePooler` — a model's pooler for one sequence task (chapter 2's runner);
* :class:`DispatchPooler` — splits a mixed batch into consecutive runs of the
  same task and hands each run to its pooler.

The reader writes ``AllPool`` itself in the chapter's lab (Exercise 1.1); the code before vLLM PR #41163,
which the profile and the capstone's switch run, is :mod:`synclab.engine.pooler_baseline`.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from typing import Mapping

import torch

from synclab.engine.pool_metadata import PoolingCursor, PoolingMetadata


PoolerOutput = list[torch.Tensor | None]  # one item per request; None: its prompt is not complete yet


class TokenPoolingMethod(ABC):
    """A pooling method: ``forward(hidden_states, pooling_metadata)`` gives one item per request.

    vLLM reads the two settings from the scheduler config; the lab passes them in.
    ``clone_finished`` follows vLLM: under async scheduling the next step may
    overwrite the hidden-states buffer before the outputs reach the host, so
    every returned tensor must own its storage.
    """

    # True for a pooler written for later vLLM's dispatcher, which hands it exactly its sub-group's
    # rows; False (at #41163) when it gets every row of the batch and a cursor sliced to its sub-group.
    receives_group_rows: bool = False

    def __init__(self, enable_chunked_prefill: bool = True, async_scheduling: bool = False) -> None:
        self.enable_chunked_prefill = enable_chunked_prefill
        self.clone_finished = bool(async_scheduling)

    @abstractmethod
    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        """``hidden_states``: ``[num_tokens, hidden]`` on the device."""

    def __call__(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        return self.forward(hidden_states, pooling_metadata)


class LastPool(TokenPoolingMethod):
    """Sequence-wise pooling (the last token of each prompt), the lab's ``classify``/``embed`` pooler.

    ``forward_all`` is vLLM's: one ``[num_reqs, hidden]`` tensor, a row for every
    request, finished or not (the runner copies only the finished rows). ``forward``
    gives the list a mixed batch's dispatcher needs: ``None`` for an unfinished prompt.
    """

    def forward_all(self, hidden_states: torch.Tensor, pooling_cursor: PoolingCursor) -> torch.Tensor:
        return hidden_states[pooling_cursor.last_token_indices_gpu]  # [num_reqs, hidden]: a gather, no sync

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        cursor = pooling_metadata.get_pooling_cursor()
        last = self.forward_all(hidden_states, cursor)  # [num_reqs, hidden]
        return [row if done else None for row, done in zip(last.unbind(0), cursor.get_finished_mask())]


class SequencePooler:
    """A whole model's pooler for one sequence-wise task: the ``[num_reqs, hidden]`` tensor, as in vLLM.

    Chapter 2's runner uses it, so its output copy moves one tensor per step, not one row per request.
    """

    def __init__(self, pooling: LastPool) -> None:
        self.pooling = pooling

    def __call__(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> torch.Tensor:
        return self.pooling.forward_all(hidden_states, pooling_metadata.get_pooling_cursor())


class DispatchPooler:
    """Hands each consecutive run of requests with the same task to that task's pooler.

    ``slice_groups=False`` is vLLM at the time of PR #41163: every pooler gets the
    *whole* batch's ``hidden_states`` and a cursor sliced to its sub-group, whose
    device indices are positions in the whole batch. ``slice_groups=True`` is
    later vLLM: the dispatcher cuts each sub-group's token range on the host
    (from ``num_scheduled_tokens_cpu``), so ``hidden_states`` has exactly
    ``sum(num_scheduled_tokens_cpu)`` rows, and rebases the device indices.
    """

    def __init__(self, poolers_by_task: Mapping[str, TokenPoolingMethod], slice_groups: bool = False) -> None:
        self.poolers_by_task = dict(poolers_by_task)
        self.slice_groups = slice_groups

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        unknown = sorted(set(pooling_metadata.tasks) - set(self.poolers_by_task))
        if unknown:
            raise ValueError(f"no pooler for task(s) {unknown}; this pooler serves {sorted(self.poolers_by_task)}")
        outputs: PoolerOutput = []
        offset = token_offset = 0
        for task, group in itertools.groupby(pooling_metadata.tasks):
            num_reqs = len(list(group))
            group_meta = pooling_metadata[offset:offset + num_reqs]
            group_hidden = hidden_states
            if self.slice_groups:
                cursor = group_meta.get_pooling_cursor()
                num_tokens = int(cursor.num_scheduled_tokens_cpu.sum())  # host tensor: no sync
                group_hidden = hidden_states[token_offset:token_offset + num_tokens]  # [num_tokens, hidden] view
                if token_offset:
                    group_meta.pooling_cursor = cursor.shifted(token_offset)
                token_offset += num_tokens
            outputs.extend(self.poolers_by_task[task](group_hidden, group_meta))
            offset += num_reqs
        return outputs

    __call__ = forward
