"""Chapter 2: the checks pass on the solution, and each check fails on a plausible wrong version."""

from __future__ import annotations

import functools

import random
from types import SimpleNamespace

import pytest
import torch

from synclab import lazy_streams as ch2
from synclab.checks import run_checks
from synclab.engine.model_runner import (ModelRunnerOutput, SyncOutputRunner, _copy_pooler_output_to_cpu,
                                         make_pooling_batch)
from synclab.device import is_simulated
from synclab.engine.platform import current_platform
from synclab.lazy_streams.checks import _diagnose
from tests.check_reports import assert_every_check_shown_to_fail, assert_passes_witness_as, outcome, witnesses
from tests.notebook_code import load_function

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

NOTEBOOK = "solutions/02_lazy_streams.ipynb"
_namespace: dict = {}
AsyncPoolingOutput = load_function(NOTEBOOK, "AsyncPoolingOutput", _namespace)
AsyncOutputRunner = load_function(NOTEBOOK, "AsyncOutputRunner", _namespace)
my_diagnosis = load_function(NOTEBOOK, "my_diagnosis", _namespace)


def test_solution_passes_every_check():
    assert ch2.check_runner(AsyncOutputRunner).passed
    assert ch2.check_diagnosis(my_diagnosis).passed


def test_where_the_host_waits():
    counts = ch2.where_the_host_waits({"sync": SyncOutputRunner, "async": AsyncOutputRunner})
    assert counts == {"sync": {"in execute_model (_pool)": 1, "in get_output()": 0},
                      "async": {"in execute_model (_pool)": 0, "in get_output()": 1}}


def test_each_spot_the_bug_runner_breaks_one_check_of_2_1():
    for name, runner in ch2.SPOT_THE_BUG.items():
        assert not ch2.check_runner(runner, seed=0).passed, name
    assert _diagnose(ch2.inspect_runner(AsyncOutputRunner)) == "no bug"


def test_step_loop_consumes_every_step_once():
    model = ch2.profile_model()
    batches = [make_pooling_batch(3, rng=random.Random(i)) for i in range(2)]
    outputs = ch2.step_loop(AsyncOutputRunner(model), batches, steps=5)
    assert len(outputs) == 5 and all(len(o) == 3 for o in outputs)


# ----------------------------------------------------------------------------- wrong versions of 2.1


class EagerStream(AsyncOutputRunner):  # the PR's first version: the stream in the constructor
    def __init__(self, model):
        super().__init__(model)
        self.async_output_copy_stream = torch.cuda.Stream()


class AlwaysAsync(AsyncOutputRunner):  # no platform check
    def _pool(self, hidden_states, num_scheduled_tokens, batch):
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        output = ModelRunnerOutput(req_ids=list(batch.req_ids))
        if not any(finished):
            output.pooler_output = [None] * len(finished)
            return output
        return AsyncPoolingOutput(output, raw, finished, self._get_or_create_async_output_copy_stream())


class NewStreamEachTime(AsyncOutputRunner):
    def _get_or_create_async_output_copy_stream(self):
        self.async_output_copy_stream = torch.cuda.Stream()
        return self.async_output_copy_stream


class PoolsEveryRow(AsyncOutputRunner):  # hands the pooler the padded batch's rows too
    def _pool(self, hidden_states, num_scheduled_tokens, batch):
        return super()._pool(hidden_states, hidden_states.shape[0], batch)


class NoWait(AsyncOutputRunner):  # get_output() forgets the event
    def _pool(self, *args):
        result = super()._pool(*args)
        if hasattr(result, "get_output"):
            result.get_output = lambda: result._model_runner_output
        return result


class DeviceWideWait(AsyncOutputRunner):
    def _pool(self, *args):
        result = super()._pool(*args)
        if hasattr(result, "get_output"):
            def get_output():
                torch.cuda.synchronize()
                return result._model_runner_output
            result.get_output = get_output
        return result


class SyncsInPool(AsyncOutputRunner):  # waits inside _pool "to be safe"
    def _pool(self, *args):
        result = super()._pool(*args)
        self._sync_device()
        return result


class CopiesOnComputeStream(AsyncOutputRunner):
    def _pool(self, hidden_states, num_scheduled_tokens, batch):
        if not current_platform.is_cuda_alike():
            return super()._pool(hidden_states, num_scheduled_tokens, batch)
        stream = torch.cuda.current_stream()  # not a side stream at all
        self._get_or_create_async_output_copy_stream()
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        return AsyncPoolingOutput(ModelRunnerOutput(list(batch.req_ids)), raw, finished, stream)


class _QueuesItsOwnCopy(AsyncOutputRunner):
    """Builds the async output by hand; ``_queue`` gets the side stream and does the copy its own (wrong) way."""

    def _queue(self, stream, compute, event, out, raw, finished):
        raise NotImplementedError

    def _pool(self, hidden_states, num_scheduled_tokens, batch):
        if not current_platform.is_cuda_alike():
            return super()._pool(hidden_states, num_scheduled_tokens, batch)
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        out = ModelRunnerOutput(list(batch.req_ids))
        if not any(finished):  # nothing to copy: the output itself
            out.pooler_output = [None] * len(finished)
            return out
        stream = self._get_or_create_async_output_copy_stream()
        result = object.__new__(AsyncPoolingOutput)
        result._model_runner_output, result._raw_pooler_output = out, raw
        result.async_copy_ready_event = torch.cuda.Event(blocking=True)
        compute = torch.cuda.current_stream()
        with torch.cuda.stream(stream):
            self._queue(stream, compute, result.async_copy_ready_event, out, raw, finished)
        return result


class RecordsBeforeCopy(_QueuesItsOwnCopy):
    def _queue(self, stream, compute, event, out, raw, finished):
        stream.wait_stream(compute)
        event.record()  # too early: covers no copy
        out.pooler_output = _copy_pooler_output_to_cpu(raw, finished)


class WaitsTheWrongWay(_QueuesItsOwnCopy):  # the compute stream waits for the side stream, not the reverse
    def _queue(self, stream, compute, event, out, raw, finished):
        compute.wait_stream(stream)  # backwards: the copies may still read unwritten hidden states
        out.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
        event.record()


class WaitsOnItself(_QueuesItsOwnCopy):  # current_stream() asked inside the side-stream block: the side stream
    def _queue(self, stream, compute, event, out, raw, finished):
        stream.wait_stream(torch.cuda.current_stream())
        out.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
        event.record()


class WaitsOnAnEventOfTheComputeStream(_QueuesItsOwnCopy):  # CUDA's other ordering: an event, not wait_stream
    said_by_the_event = False  # side.wait_event(ready), or ready.wait(side)

    def _queue(self, stream, compute, event, out, raw, finished):
        ready = torch.cuda.Event()
        ready.record(compute)
        if self.said_by_the_event:
            ready.wait(stream)
        else:
            stream.wait_event(ready)
        out.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
        event.record()


class WaitsWithEventWait(WaitsOnAnEventOfTheComputeStream):  # the same ordering, said from the event's side
    said_by_the_event = True


class WaitsOnAnUnrecordedEvent(_QueuesItsOwnCopy):  # an event never recorded orders nothing, on CUDA too
    def _queue(self, stream, compute, event, out, raw, finished):
        stream.wait_event(torch.cuda.Event())
        out.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
        event.record()


class KeepsDeviceTensors(AsyncOutputRunner):
    def _pool(self, *args):
        result = super()._pool(*args)
        if hasattr(result, "get_output"):
            raw, plain = result._raw_pooler_output, result.get_output

            def get_output():
                out = plain()
                result.kept = raw  # holds the device memory for as long as the output lives
                return out
            result.get_output = get_output
        return result


class _HostCopyInPool(AsyncOutputRunner):
    """Creates the side stream, then copies in _pool itself: no asynchronous copy is ever queued."""

    def _copy(self, raw):
        raise NotImplementedError

    def _pool(self, hidden_states, num_scheduled_tokens, batch):
        if not current_platform.is_cuda_alike():
            return super()._pool(hidden_states, num_scheduled_tokens, batch)
        self._get_or_create_async_output_copy_stream()
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        out = ModelRunnerOutput(list(batch.req_ids))
        out.pooler_output = [row if done else None for row, done in zip(self._copy(raw), finished)]
        return SimpleNamespace(get_output=lambda: out)


class CopiesWithCpu(_HostCopyInPool):  # a blocking .cpu()
    def _copy(self, raw):
        return raw.cpu()


class CopiesIntoPageable(_HostCopyInPool):  # a non_blocking copy into torch.empty: pageable, so synchronous
    def _copy(self, raw):
        return torch.empty(raw.shape, dtype=raw.dtype).copy_(raw, non_blocking=True)


WRONG_2_1 = [
    (EagerStream, "CPU platform"),
    (AlwaysAsync, "CPU platform"),
    (NoWait, "right outputs after get_output"),
    (NewStreamEachTime, "created on first use"),
    (CopiesOnComputeStream, "created on first use"),
    (SyncsInPool, "no sync in _pool"),
    (DeviceWideWait, "no sync in _pool"),
    (RecordsBeforeCopy, "recorded after"),
    (KeepsDeviceTensors, "then released"),
    (ch2.RunnerD, "then released"),
    (CopiesWithCpu, "no sync in _pool"),
    (CopiesIntoPageable, "no sync in _pool"),
    (WaitsTheWrongWay, "copy waits for the compute stream"),
    (WaitsOnItself, "copy waits for the compute stream"),
    (PoolsEveryRow, "CUDA path"),
    (PoolsEveryRow, "CPU platform"),
]


def test_a_runner_that_pools_the_padding_rows_is_told_to_slice_them_off():
    """The contract's "only the first num_scheduled_tokens rows are real" has its case: some batches come padded, as
    a CUDA graph's do, and a pooler handed every row is told what the rows past num_scheduled_tokens are."""
    report = ch2.check_runner(PoolsEveryRow, seed=0)
    cuda = next(o for o in report.outcomes if "CUDA path" in o.name)
    assert cuda.status == "failed" and "padded with" in cuda.case, str(report)
    assert "rows of hidden states" in cuda.message and "hidden_states[:num_scheduled_tokens]" in cuda.hint


def test_a_side_stream_waiting_on_itself_is_told_to_capture_the_compute_stream_first():
    report = ch2.check_runner(WaitsOnItself, seed=0)
    ordering = next(o for o in report.outcomes if "copy waits for the compute stream" in o.name)
    assert "waited on itself" in ordering.message and "before you enter the side stream" in ordering.hint, report


class _EventMadeAtImport:
    """What recording an event torch made outside the simulated GPU raises (torch's words, not the cause)."""

    def record(self, stream=None):
        raise TypeError("expected stream to be a torch.Stream or torch.cuda.Stream object")

    def synchronize(self):
        pass


class RecordsAnEventMadeAtImport(_QueuesItsOwnCopy):
    def _queue(self, stream, compute, event, out, raw, finished):
        stream.wait_stream(compute)
        out.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
        _EventMadeAtImport().record()


def test_an_event_made_when_the_cell_ran_is_told_to_be_made_in_the_methods():
    report = ch2.check_runner(RecordsAnEventMadeAtImport, seed=0)
    crashed = [o for o in report.outcomes if o.status == "crashed"]
    assert crashed and all("inside the methods, when a step needs them" in o.hint for o in crashed), report


@pytest.mark.parametrize("wrong,failing_check", WRONG_2_1, ids=[w.__name__ for w, _ in WRONG_2_1])
def test_each_check_catches_a_wrong_version(wrong, failing_check):
    """Each wrong version fails its check; every check it passes witnesses what the solution's does (the grader
    verifies a passed check by its witness: a bug one check names must not cost another)."""
    report = ch2.check_runner(wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)
    assert_passes_witness_as(report, _right_witnesses())


def test_every_check_is_shown_to_fail():
    assert_every_check_shown_to_fail(ch2.CHECKS_2_1, WRONG_2_1 + [(w, c) for w, c, _ in NEW_2_1_MISTAKES])


class CopiesNothingWhenCounted(AsyncOutputRunner):  # right; while syncs are counted, it queues no copy at all
    def _pool(self, hidden_states, num_scheduled_tokens, batch):
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        if not is_simulated(hidden_states.device) or not any(finished):  # simulated: only inside count_syncs
            return super()._pool(hidden_states, num_scheduled_tokens, batch)
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        nothing = [False] * len(finished)  # every request "unfinished": no copy, and the same one wait
        return AsyncPoolingOutput(ModelRunnerOutput(list(batch.req_ids)), raw, nothing,
                                  self._get_or_create_async_output_copy_stream())


def test_a_call_that_is_counted_is_also_checked():
    """Code that can tell it is counted gains nothing: the syncs count only on a step whose outputs count."""
    report = ch2.check_runner(CopiesNothingWhenCounted, seed=0)
    assert all(o.status == "passed" for o in report.outcomes if "no sync in _pool" not in o.name), str(report)
    syncs = next(o for o in report.outcomes if "no sync in _pool" in o.name)
    assert syncs.status == "failed" and syncs.message == "wrong pooler_output from the counted step", str(report)
    assert syncs.case.startswith("the counted step"), str(report)


def test_wrong_diagnoses_fail_with_the_runner_named():
    def wrong():
        answers = dict(my_diagnosis())
        answers["A"], answers["C"] = answers["C"], answers["A"]
        return answers

    report = ch2.check_diagnosis(wrong)
    text = str(report)
    assert not report.passed and "A: you said 'early read', but the evidence shows no such thing (outputs right: " \
        "True)" in text
    assert "C: you said 'unordered', but the evidence shows no such thing (the stream log has wait_stream)" in text
    assert "the evidence says" not in text  # the evidence that rules a label out, never the right label
    assert not ch2.check_diagnosis(lambda: {"A": "early read"}).passed
    assert not ch2.check_diagnosis(lambda: {k: "typo" for k in ch2.SPOT_THE_BUG}).passed


def test_a_consequence_named_as_the_bug_is_told_it_is_a_consequence():
    """Runner C reads without waiting: its tensors let go follow from that. It makes no wait at all, which is not
    an over-wait (a wait for the whole device): that label is ruled out by the evidence (a learner read it so)."""
    right = {"A": "unordered", "B": "pageable", "C": "early read", "D": "freed early", "E": "over-wait",
             "F": "early read"}
    assert ch2.check_diagnosis(lambda: right).passed
    report = ch2.check_diagnosis(lambda: {**right, "C": "freed early"})
    text = str(report)
    assert not report.passed and "C: you said 'freed early'; that shows" in text, text
    assert "it is a consequence: another symptom of C explains it" in text and "early read" not in text, text
    text = str(ch2.check_diagnosis(lambda: {**right, "C": "over-wait"}))
    assert "C: you said 'over-wait', but the evidence shows no such thing (waits in get_output: none)" in text, text


def test_every_runners_reason_is_shown_whole_and_each_right_one_earns_its_share():
    """A learner's two wrong labels once came back cut off mid-sentence: the reasons sat in a value's 300 characters."""
    right = {"A": "unordered", "B": "pageable", "C": "early read", "D": "freed early", "E": "over-wait",
             "F": "early read"}
    report = ch2.check_diagnosis(lambda: {**right, "C": "freed early", "D": "early read"})
    text = str(report)
    assert "D: you said 'early read', but the evidence shows no such thing (outputs right: True)" in text, text
    assert "..." not in text
    assert report.outcomes[0].share == pytest.approx(4 / 6)  # four of six right


def test_a_stream_made_in_the_constructor_is_named_by_the_lazy_stream_check_first():
    """A learner's eager stream was pointed at the "nothing finished" check, whose hint describes another fault."""
    report = ch2.check_runner(EagerStream, seed=0)
    assert report.lead is not None and report.lead.name.startswith("the side stream is created on first use")
    assert next(o for o in report.outcomes if o.name.startswith("a step where nothing finished")).ok


def test_a_stub_reports_not_implemented():
    class Stub(AsyncOutputRunner):
        def _pool(self, *args):
            raise NotImplementedError("Exercise 2.1")

    report = ch2.check_runner(Stub)
    assert {o.status for o in report.outcomes} == {"not implemented"}


@pytest.mark.parametrize("wrong", [CopiesWithCpu, CopiesIntoPageable], ids=["cpu()", "pageable buffer"])
def test_a_blocking_copy_is_reported_as_a_sync_not_as_a_stream_mistake(wrong):
    report = ch2.check_runner(wrong, seed=0)
    assert outcome(report, "created on first use") == "passed", str(report)
    (syncs,) = [o for o in report.outcomes if "no sync in _pool" in o.name]
    assert syncs.status == "failed" and ("device-to-host" in syncs.got or "pageable" in syncs.got), str(report)


def test_polling_the_event_finishes_and_is_named_as_the_busy_wait_it_is():
    """A get_output() that loops on event.query() ends under the simulated device (no 65 s hang), and fails."""

    class Polls(AsyncOutputRunner):
        def _pool(self, *args):
            result = super()._pool(*args)
            if hasattr(result, "get_output"):
                event = result.async_copy_ready_event

                def get_output():
                    while not event.query():
                        pass
                    result._raw_pooler_output = None
                    return result._model_runner_output

                result.get_output = get_output
            return result

    report = ch2.check_runner(Polls, seed=0)
    syncs = next(o for o in report.outcomes if "no sync in _pool" in o.name)
    assert syncs.status == "failed" and "polls event.query()" in syncs.message and "#47081" in syncs.hint, report
    assert outcome(report, "right outputs after get_output") == "passed", report  # the poll did wait for the copy


# ----------------------------------------------------------------------------- the MODEL of the loop (chapter 2)


def _rows_of(fig, state: str) -> set[str]:
    return {row.split(" · ")[0] for trace in fig.data if trace.name == state for row in trace.y}


def test_the_model_figure_puts_each_wait_where_the_lab_counted_it():
    waits = ch2.where_the_host_waits({"sync": SyncOutputRunner, "async": AsyncOutputRunner})
    assert waits == {"sync": {"in execute_model (_pool)": 1, "in get_output()": 0},
                     "async": {"in execute_model (_pool)": 0, "in get_output()": 1}}
    fig = ch2.output_copy_model(waits)
    assert fig.layout.title.text.startswith("MODEL")
    assert _rows_of(fig, "waiting (end of step)") == {"sync"}
    assert _rows_of(fig, "waiting (get_output)") == {"async"}
    assert "sync 1 in _pool, 0 in get_output(); async 0 in _pool, 1 in get_output()" in fig.layout.title.text


def test_a_runner_that_still_drains_the_device_is_drawn_draining_it():
    """Driven by the counts, not by the names: a runner that waits in _pool as well as in get_output() (a 2.1
    that kept the old wait) is drawn draining the device every step, its copy on the compute stream."""
    both = ch2.output_copy_model({"both": {"in execute_model (_pool)": 1, "in get_output()": 1}})
    assert _rows_of(both, "waiting (end of step)") == {"both"}
    assert "side stream" not in {row.split(" · ")[1] for trace in both.data for row in trace.y}


def test_the_model_shows_the_overlap_the_pr_bought():
    from synclab.timeline_model import simulate_output_loop

    kwargs = dict(host_us=30.0, forward_us=60.0, copy_us=25.0, launch_us=5.0)
    before = [simulate_output_loop(**kwargs, wait_in_step=True, wait_in_get_output=False, steps=n) for n in (8, 9)]
    after = [simulate_output_loop(**kwargs, wait_in_step=False, wait_in_get_output=True, steps=n) for n in (8, 9)]
    assert before[1].total_us - before[0].total_us == 30 + 5 + 60 + 25  # host, launch, forward, copy: in turn
    assert after[1].total_us - after[0].total_us == 60  # forwards back to back; the copy hides beside them
    forwards = sorted((i.start_us, i.end_us) for i in after[1].intervals if i.state == "forward")
    assert all(b[0] == a[1] for a, b in zip(forwards[1:], forwards[2:]))  # no gap once the loop runs
    copies = [i for i in after[1].intervals if i.state == "copy"]
    assert {i.lane for i in copies} == {"side stream"}
    assert after[1].compute_busy_share > 0.85 > 0.55 > before[1].compute_busy_share


class LearnersOutput:  # a learner's AsyncPoolingOutput, as the solution's; the classes below change one thing
    keeps_reference = True  # the device tensors held until get_output() has waited
    event_on_side_stream = True

    def __init__(self, model_runner_output, raw_pooler_output, finished_mask, async_output_copy_stream):
        self._model_runner_output = model_runner_output
        self._raw = raw_pooler_output if self.keeps_reference else None
        self.async_copy_ready_event = torch.cuda.Event(blocking=True)
        compute_stream = torch.cuda.current_stream()
        with torch.cuda.stream(async_output_copy_stream):
            async_output_copy_stream.wait_stream(compute_stream)
            model_runner_output.pooler_output = self._copy(raw_pooler_output, finished_mask, async_output_copy_stream)
            if self.event_on_side_stream:
                self.async_copy_ready_event.record()
        if not self.event_on_side_stream:
            self.async_copy_ready_event.record()  # on the compute stream: it does not cover the copies

    def _copy(self, raw, finished, stream):
        return _copy_pooler_output_to_cpu(raw, finished)

    def get_output(self):
        self.async_copy_ready_event.synchronize()
        self._raw = None
        return self._model_runner_output


class RecordStreamOutput(LearnersOutput):  # record_stream on the side stream instead of keeping a reference
    keeps_reference = False

    def _copy(self, raw, finished, stream):
        out = super()._copy(raw, finished, stream)
        raw.record_stream(stream)  # the allocator waits for the side stream
        return out


class EventOnComputeStream(LearnersOutput):  # the event recorded after leaving the side stream's block
    event_on_side_stream = False


class PageableCopyOutput(LearnersOutput):  # its own copy, into a pageable buffer
    def _copy(self, raw, finished, stream):
        host = torch.empty(raw.shape, dtype=raw.dtype)  # not pinned
        host.copy_(raw, non_blocking=True)
        return [row if done else None for row, done in zip(host, finished)]


def runner_with(output_cls):
    """The solution's runner, handing its copy to ``output_cls`` instead of the solution's output."""

    class Runner(AsyncOutputRunner):
        def _pool(self, hidden_states, num_scheduled_tokens, batch):
            raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
            finished = batch.metadata.get_pooling_cursor().get_finished_mask()
            output = ModelRunnerOutput(req_ids=list(batch.req_ids))
            if not any(finished):
                output.pooler_output = [None] * len(finished)
                return output
            if not current_platform.is_cuda_alike():
                output.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
                self._sync_device()
                return output
            return output_cls(output, raw, finished, self._get_or_create_async_output_copy_stream())

    Runner.__name__ = f"RunnerWith{output_cls.__name__}"
    return Runner


class RecordsInGetOutput(LearnersOutput):  # the event made and recorded when the output is collected
    event_on_side_stream = False

    def __init__(self, model_runner_output, raw_pooler_output, finished_mask, async_output_copy_stream):
        self._model_runner_output, self._raw = model_runner_output, raw_pooler_output
        self._stream = async_output_copy_stream
        compute_stream = torch.cuda.current_stream()
        with torch.cuda.stream(async_output_copy_stream):
            async_output_copy_stream.wait_stream(compute_stream)
            model_runner_output.pooler_output = self._copy(raw_pooler_output, finished_mask, async_output_copy_stream)

    def get_output(self):
        event = torch.cuda.Event(blocking=True)
        event.record(self._stream)  # by now the next step's copies are queued on this stream too
        event.synchronize()
        self._raw = None
        return self._model_runner_output


class SpinningEvent(LearnersOutput):  # torch.cuda.Event(): its synchronize() spins on the driver
    def __init__(self, model_runner_output, raw_pooler_output, finished_mask, async_output_copy_stream):
        super().__init__(model_runner_output, raw_pooler_output, finished_mask, async_output_copy_stream)
        spinning = torch.cuda.Event()
        spinning.record(async_output_copy_stream)
        self.async_copy_ready_event = spinning


class CopiesEvenWhenNothingFinished(AsyncOutputRunner):  # no early return: a stream and a wait for nothing
    def _pool(self, hidden_states, num_scheduled_tokens, batch):
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        output = ModelRunnerOutput(req_ids=list(batch.req_ids))
        if not current_platform.is_cuda_alike():
            output.pooler_output = _copy_pooler_output_to_cpu(raw, finished)
            self._sync_device()
            return output
        return AsyncPoolingOutput(output, raw, finished, self._get_or_create_async_output_copy_stream())


class CpuPathWithoutSyncDevice(AsyncOutputRunner):  # the CPU/XPU path copies and returns, never _sync_device()
    def _pool(self, hidden_states, num_scheduled_tokens, batch):
        if current_platform.is_cuda_alike():
            return super()._pool(hidden_states, num_scheduled_tokens, batch)
        raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
        finished = batch.metadata.get_pooling_cursor().get_finished_mask()
        output = ModelRunnerOutput(req_ids=list(batch.req_ids))
        output.pooler_output = _copy_pooler_output_to_cpu(raw, finished) if any(finished) else [None] * len(finished)
        return output


NEW_2_1_MISTAKES = [
    (runner_with(RecordsInGetOutput), "the engine's order", "the event is recorded in get_output()"),
    (runner_with(SpinningEvent), "no sync in _pool", "the event waited on is not a blocking one"),
    (CopiesEvenWhenNothingFinished, "nothing finished", "side streams created for a step with nothing to copy"),
    (CpuPathWithoutSyncDevice, "CPU platform", "the CPU path copied without self._sync_device()"),
]


@pytest.mark.parametrize("wrong, check, message", NEW_2_1_MISTAKES, ids=[m[0].__name__ for m in NEW_2_1_MISTAKES])
def test_each_2_1_clause_fails_by_name_on_every_seed(wrong, check, message):
    for seed in range(3):
        report = ch2.check_runner(wrong, seed=seed)
        failed = next(o for o in report.outcomes if check in o.name)
        assert failed.status == "failed" and message in failed.message, str(report)


class DropsTheReference(RecordStreamOutput):  # neither a reference nor record_stream: freed while copied
    def _copy(self, raw, finished, stream):
        return _copy_pooler_output_to_cpu(raw, finished)


def test_record_stream_is_a_correct_alternative_on_every_seed():
    """PyTorch's other way to keep a block for a side stream: the simulated streams give it CUDA's meaning. Every
    check passes it; the memory check, the one its difference meets, on every seed."""
    memory = [c for c in ch2.CHECKS_2_1 if "then released" in c.name]
    for seed in range(20):
        report = (ch2.check_runner(runner_with(RecordStreamOutput), seed=seed) if seed < 4 else
                  run_checks("2.1's memory", memory, runner_with(RecordStreamOutput), seed=seed))
        assert report.passed, str(report)
    assert ch2.check_runner(runner_with(LearnersOutput), seed=0).passed  # the shared shape is right as it stands
    report = ch2.check_runner(runner_with(DropsTheReference), seed=0)
    assert outcome(report, "device tensors kept") == "failed", str(report)


@pytest.mark.parametrize("runner", [WaitsOnAnEventOfTheComputeStream, WaitsWithEventWait])
def test_ordering_by_an_event_of_the_compute_stream_is_a_correct_alternative(runner):
    """``side.wait_event(ev)`` / ``ev.wait(side)`` after ``ev.record(compute)``: the order wait_stream gives."""
    for seed in range(5):
        report = ch2.check_runner(runner, seed=seed)
        assert report.passed, str(report)


def test_waiting_on_an_event_never_recorded_orders_nothing():
    report = ch2.check_runner(WaitsOnAnUnrecordedEvent, seed=0)
    assert not report.passed, str(report)


def test_an_event_recorded_on_the_compute_stream_is_named_as_such_on_every_seed():
    ordering_check = [c for c in ch2.CHECKS_2_1 if "event is recorded after it" in c.name]
    for seed in range(20):
        report = run_checks("2.1's ordering", ordering_check, runner_with(EventOnComputeStream), seed=seed)
        (ordering,) = [o for o in report.outcomes if "event is recorded after it" in o.name]
        assert ordering.status == "failed", str(report)
        assert ordering.message == "the event was recorded on the default stream, but the copies ran on side stream 1"
        assert "records on the current stream" in ordering.hint


def test_a_hand_written_copy_into_pageable_memory_is_named_as_one():
    report = ch2.check_runner(runner_with(PageableCopyOutput), seed=0)
    text = str(report)
    (syncs,) = [o for o in report.outcomes if "no sync in _pool" in o.name]
    assert syncs.status == "failed" and "pageable" in syncs.got and "into pageable memory" in syncs.hint, text
    (ordering,) = [o for o in report.outcomes if "event is recorded after it" in o.name]
    assert ordering.message == "no asynchronous copy to the host was queued on a stream", text
    assert "a copy into pageable memory" in ordering.hint and "copies *from*" not in ordering.hint


def test_an_event_on_the_compute_stream_is_named_in_the_outputs_check_too():
    """The first check it fails says which stream recorded the event and which ran the copies, not only "garbage"."""
    report = ch2.check_runner(runner_with(EventOnComputeStream), seed=0)
    (outputs,) = [o for o in report.outcomes if "right outputs after get_output" in o.name]
    assert outputs.status == "failed", str(report)
    assert "the event was recorded on the default stream, but the copies ran on side stream 1" in outputs.hint


class RecordStreamOnComputeStream(RecordStreamOutput):  # record_stream with the compute stream
    def __init__(self, model_runner_output, raw_pooler_output, finished_mask, async_output_copy_stream):
        self._compute = torch.cuda.current_stream()  # captured before the side stream's block
        super().__init__(model_runner_output, raw_pooler_output, finished_mask, async_output_copy_stream)

    def _copy(self, raw, finished, stream):
        out = _copy_pooler_output_to_cpu(raw, finished)
        raw.record_stream(self._compute)
        return out


def test_record_stream_on_the_wrong_stream_is_named_as_such():
    report = ch2.check_runner(runner_with(RecordStreamOnComputeStream), seed=0)
    (memory,) = [o for o in report.outcomes if "then released" in o.name]
    assert memory.status == "failed", str(report)
    assert "record_stream kept" in memory.message and "for the default stream" in memory.message, str(report)
    assert "drop the reference" not in memory.hint


def test_the_engines_order_blames_an_event_that_covers_no_copy_not_shared_buffers():
    """A learner's report: an event recorded outside the side stream's block was blamed on buffers shared between
    steps. The engine's-order check now names the event."""
    report = ch2.check_runner(runner_with(EventOnComputeStream), seed=0)
    (engine,) = [o for o in report.outcomes if o.name.startswith("the engine's order")]
    assert engine.status == "failed" and "covers no copy" in engine.hint and "shared" not in engine.hint, str(report)


class EmptyListWhenNothingFinished(AsyncOutputRunner):  # [] where the contract asks for a None per request
    def _pool(self, hidden_states, num_scheduled_tokens, batch):
        if not any(batch.metadata.get_pooling_cursor().get_finished_mask()):
            return ModelRunnerOutput(req_ids=list(batch.req_ids), pooler_output=[])
        return super()._pool(hidden_states, num_scheduled_tokens, batch)


def test_a_wrongly_shaped_output_is_not_blamed_on_an_early_read():
    """A learner's [] for a step where nothing finished drew the hint about garbage read before the copy landed."""
    report = ch2.check_runner(EmptyListWhenNothingFinished, seed=0)
    failed = [o for o in report.outcomes if o.name.startswith("CUDA path") and not o.ok]
    assert failed and "garbage" not in failed[0].hint and "None for a request that did not finish" in failed[0].hint, \
        str(report)


@functools.cache
def _right_witnesses() -> dict[str, str]:
    """Each check's witness for the solution of 2.1 on seed 0 (computed once for every wrong version)."""
    return witnesses(ch2.check_runner(AsyncOutputRunner, seed=0))


@pytest.mark.parametrize("wrong", [w for w, _, _ in NEW_2_1_MISTAKES],
                         ids=lambda w: w.__name__)
def test_a_passed_check_witnesses_what_a_right_answer_does_whatever_else_is_wrong(wrong):
    """The grader verifies each passed check of 2.1 that compares results exactly by its witness against a right answer's on
    the same seed: a bug that one check names must not change another check's witness (the first wrong versions'
    witnesses are checked where each is shown to fail)."""
    right = _right_witnesses()
    # the five checks that compare outputs, and the lazy stream's counts of streams created, are verified
    assert sum(map(bool, right.values())) == 6
    report = ch2.check_runner(wrong, seed=0)
    assert_passes_witness_as(report, right)


class ClonesBeforeWaiting(AsyncOutputRunner):  # get_output() copies the host buffers, then waits: too early
    def _pool(self, *args):
        result = super()._pool(*args)
        if hasattr(result, "get_output"):
            output, event = result._model_runner_output, result.async_copy_ready_event

            def get_output():
                output.pooler_output = [t.clone() if t is not None else None for t in output.pooler_output]
                event.synchronize()
                del result._raw_pooler_output
                return output

            result.get_output = get_output
        return result


def test_copies_made_before_the_wait_are_named_so_by_every_check_they_fail():
    """Not "buffers shared between steps", not "pageable buffers": what the host read before the copy landed."""
    report = ch2.check_runner(ClonesBeforeWaiting, seed=0)
    failed = [o for o in report.outcomes if o.status == "failed"]
    assert failed and not any("shared between steps" in o.hint for o in failed), str(report)
    memory = next(o for o in report.outcomes if "then released" in o.name)
    assert memory.status == "failed" and "before the wait" in memory.hint, str(report)


def test_labels_matched_by_elimination_fail_on_the_runner_that_shares_a_mistake():
    """C and F make the same mistake in two ways (F waits on an event recorded before its copy): a diagnosis that
    uses every label once names F by what is left, and the evidence rules that out."""
    one_each = {"A": "unordered", "B": "pageable", "C": "early read", "D": "freed early", "E": "over-wait",
                "F": "unordered"}
    report = ch2.check_diagnosis(lambda: one_each)
    text = str(report)
    assert not report.passed and "F: you said 'unordered', but the evidence shows no such thing" in text, text
    assert "early read" not in text.split("F: you said")[1].split(";")[0], text  # never the right label


class DropsTheLastOutput(AsyncOutputRunner):  # the last finished request's vector lost after the wait
    def execute_model(self, batch):
        result = super().execute_model(batch)
        output = result.get_output() if hasattr(result, "get_output") else result
        if output.pooler_output:
            output.pooler_output = [*output.pooler_output[:-1], None]
        return output


def test_a_wrong_output_in_a_long_batch_names_the_first_request_it_differs_at():
    """A learner's report for a batch of 49 requests showed `[None, None, None, None, ...]` twice: the difference
    was past the first four. The message now names the first request whose entry differs."""
    report = ch2.check_runner(DropsTheLastOutput, seed=0)
    failed = next(o for o in report.outcomes if o.status == "failed")
    assert "(first at request" in failed.message and "got None" in failed.message, str(report)


_EVENT_BOUND_AT_IMPORT = functools.partial(torch.Event, blocking=True)  # torch's own class, bound before any check


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the real class records: the answer is right there")
def test_an_event_class_bound_at_import_is_named_as_the_simulations_limit(monkeypatch):
    """A learner's right answer bound torch.Event in a functools.partial at module level: the simulated GPU replaces
    the class only later, so on a machine without CUDA the real one raises about the driver or the backend. The crash
    says what happened and what to write instead (on a GPU the answer is right)."""

    class BoundAtImport(AsyncPoolingOutput):
        def __init__(self, model_runner_output, raw_pooler_output, finished_mask, async_output_copy_stream):
            self._model_runner_output = model_runner_output
            self._raw_pooler_output = raw_pooler_output
            self.async_copy_ready_event = _EVENT_BOUND_AT_IMPORT()
            compute_stream = torch.cuda.current_stream()
            with torch.cuda.stream(async_output_copy_stream):
                async_output_copy_stream.wait_stream(compute_stream)
                model_runner_output.pooler_output = _copy_pooler_output_to_cpu(raw_pooler_output, finished_mask)
                self.async_copy_ready_event.record()

    monkeypatch.setitem(_namespace, "AsyncPoolingOutput", BoundAtImport)  # what the solution's _pool builds
    report = ch2.check_runner(AsyncOutputRunner, seed=1)
    crashed = [o for o in report.outcomes if o.status == "crashed"]
    assert crashed and all("bound before the checks' simulated GPU" in o.hint for o in crashed), str(report)


def test_host_blocked_says_when_the_cpu_step_times_part():
    """On a CPU both runners take one path: a gap past a tenth is named as noise (a learner saw 24% unexplained when
    the line was a quarter), a small one is not."""
    from synclab.device import has_cuda
    from synclab.lazy_streams import host_blocked_note

    if has_cuda():
        pytest.skip("on a GPU the gap is the fix's")
    close = {"sync": {"step_us": 1000.0, "host_waiting_us": 5.0}, "async": {"step_us": 1080.0, "host_waiting_us": 4.0}}
    apart = {"sync": {"step_us": 1354.0, "host_waiting_us": 5.0}, "async": {"step_us": 1679.0, "host_waiting_us": 4.0}}
    assert host_blocked_note(close) == ""
    note = host_blocked_note(apart)
    assert "1.24x apart" in note and "noise" in note


def test_the_evidence_prints_a_line_per_key_and_a_log_under_its_key():
    """What the lab's evidence cells print (ch2.evidence_text), the stream log on the lines under its name."""
    from synclab.lazy_streams import evidence_text

    evidence = {"outputs right": True, "stream ops": ["copy"], "stream log": "  0  default  copy\n  1  default  wait"}
    assert evidence_text(evidence) == "outputs right: True\nstream log: \n  0  default  copy\n  1  default  wait"
    assert evidence_text(evidence, leave_out=("stream ops", "stream log")) == "outputs right: True"
