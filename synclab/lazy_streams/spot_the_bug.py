"""Chapter 2, Exercise 2.2: six broken versions of the output path the reader wrote in Exercise 2.1.

A room of :mod:`synclab.lazy_streams` (its docstring tells the chapter). The lab sends the reader
here to read the runners: each has one mistake, and its evidence (``ch2.inspect_runner``) shows
it. Two of them make the same mistake in two ways (C and F read before the copy lands), so the labels
cannot be matched to the runners by elimination. Nothing here is a complete Exercise 2.1: the output
class has no default switches and is kept from the reader's code while 2.1 is checked.
"""

from __future__ import annotations

from typing import Any

import torch

from synclab.engine.model_runner import ModelRunnerOutput, PoolingBatch, PoolingModelRunner, _copy_pooler_output_to_cpu
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


@answer_key("2.1", role="spot-the-bug output (it holds Exercise 2.1's parts, each runner breaks one)")
class _SpotTheBugOutput:
    """An async output with switches for the mistakes of Exercise 2.2: every switch must be set.

    No switch has a default, so the class is never a finished Exercise 2.1 by accident;
    each runner below sets one of them wrong (or breaks another step).
    """

    def __init__(self, output: ModelRunnerOutput, raw: torch.Tensor, finished: list[bool], stream: Any, *,
                 wait_for_forward: bool, keep_raw: bool, pageable: bool, event_first: bool) -> None:
        self._output = output
        self._raw = raw if keep_raw else None
        self.event = torch.cuda.Event(blocking=True)
        compute = torch.cuda.current_stream()
        with torch.cuda.stream(stream):
            if wait_for_forward:
                stream.wait_stream(compute)
            if event_first:  # recorded before the copies are queued: waiting on it does not wait for them
                self.event.record()
            if pageable:  # a host buffer from torch.empty: pageable memory
                host = torch.empty(raw.shape, dtype=raw.dtype)  # [num_reqs, hidden]
                host.copy_(raw, non_blocking=True)
                output.pooler_output = [row if f else None for row, f in zip(host.unbind(0), finished)]
            else:
                output.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
            if not event_first:
                self.event.record()

    def get_output(self) -> ModelRunnerOutput:
        self.event.synchronize()
        self._raw = None
        return self._output


class _SpotTheBugRunner(PoolingModelRunner):
    options: dict[str, bool]  # every runner says all four switches of _SpotTheBugOutput

    def _stream(self) -> Any:
        if self.async_output_copy_stream is None:
            self.async_output_copy_stream = torch.cuda.Stream()
        return self.async_output_copy_stream

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int, batch: PoolingBatch) -> Any:
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        return _SpotTheBugOutput(ModelRunnerOutput(list(batch.req_ids)), raw, finished, self._stream(),
                                 **self.options)


class RunnerA(_SpotTheBugRunner):
    options = {"wait_for_forward": False, "keep_raw": True, "pageable": False, "event_first": False}


class RunnerB(_SpotTheBugRunner):
    options = {"wait_for_forward": True, "keep_raw": True, "pageable": True, "event_first": False}


class RunnerC(_SpotTheBugRunner):
    options = {"wait_for_forward": True, "keep_raw": True, "pageable": False, "event_first": False}

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int, batch: PoolingBatch) -> Any:
        result = super()._pool(hidden_states, num_scheduled_tokens, batch)
        return result._output  # hands back the output object without its get_output()


class RunnerD(_SpotTheBugRunner):
    options = {"wait_for_forward": True, "keep_raw": False, "pageable": False, "event_first": False}


class _WaitsForEverything(_SpotTheBugOutput):
    def get_output(self) -> ModelRunnerOutput:
        torch.cuda.synchronize()
        self._raw = None
        return self._output


class RunnerE(_SpotTheBugRunner):
    options = {"wait_for_forward": True, "keep_raw": True, "pageable": False, "event_first": False}

    def _pool(self, hidden_states: torch.Tensor, num_scheduled_tokens: int, batch: PoolingBatch) -> Any:
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        return _WaitsForEverything(ModelRunnerOutput(list(batch.req_ids)), raw, finished, self._stream(),
                                   **self.options)


class RunnerF(_SpotTheBugRunner):
    options = {"wait_for_forward": True, "keep_raw": True, "pageable": False, "event_first": True}


SPOT_THE_BUG = {"A": RunnerA, "B": RunnerB, "C": RunnerC, "D": RunnerD, "E": RunnerE, "F": RunnerF}


BUG_LABELS = {
    "early read": "the host reads the outputs before the copy has landed",
    "pageable": "a non_blocking copy into pageable memory: a hidden sync inside _pool",
    "unordered": "the copy is not ordered after the forward pass (no wait_stream)",
    "freed early": "the device tensors may be freed while the copy still reads them",
    "over-wait": "get_output() waits for the whole device, not just the copy",
}
