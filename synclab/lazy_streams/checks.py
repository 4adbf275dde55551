"""Chapter 2 (lazy streams): the checks of the chapter's exercises, each a Check that names the reader's fault.

A room of :mod:`synclab.lazy_streams` (its docstring tells the chapter).
"""

from __future__ import annotations

import contextlib
import gc
import random
from collections.abc import Mapping
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from synclab.answer_keys.plain_data import tensors_as_data, tensors_from_data
from synclab.answer_keys.runners import runs_with_the_answer
from synclab.checks import (Check, CheckFailed, Clause, CheckReport, expect, expect_equal, run_checks, found_right,
                            found_right_tensor)
from synclab.device import is_pinned_host, simulated_device
from synclab.engine.model_runner import ModelRunnerOutput, PoolingBatch, TinyPoolingModel, make_pooling_batch
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


from synclab.lazy_streams.spot_the_bug import BUG_LABELS, SPOT_THE_BUG
from synclab.lazy_streams.workloads import (RunnerClass, _batches, _describe, _first_difference, _model, _same,
                                            cpu_platform, resolve, watch_pooler_outputs)
from synclab.sim import cuda as sim_cuda
from synclab.syncs import count_syncs


# ----------------------------------------------------------------------------- checks of Exercise 2.1
# The checks reach the reader's runner through runners (synclab.answer_keys.runners): each builds its case where
# the runner class lives (in a notebook, here; in the grader, the answer's process), runs it on the simulated
# device, and sends back what it saw as data: the outputs' values, the stream log, the waits, what stayed alive.
# The checks compute the pooled values themselves, from the same batches drawn from the same seed, on the host: a
# reference is the grader's work, not the device's (on the device process each of its reads would be a round trip).
HOST = torch.device("cpu")


@answer_key("2.1", role="the pooled values (what every right answer hands back)", scope="checks")
def _pool_reference(model: TinyPoolingModel, batch: PoolingBatch) -> list[torch.Tensor | None]:
    """A plain reference: everything brought to the host first, then each finished request's last token."""
    hidden = model.forward(batch.input_ids).cpu()  # [num_tokens, hidden] host
    cursor = batch.metadata.get_pooling_cursor()
    last = cursor.last_token_indices_gpu.cpu().tolist()
    return [hidden[i].clone() if done else None for i, done in zip(last, cursor.get_finished_mask())]


_PADDING_HINT = ("pool hidden_states[:num_scheduled_tokens]: the forward pass may run over a padded batch (a CUDA "
                 "graph's fixed size), and only the step's first num_scheduled_tokens rows are its tokens")


class _RealRowsOnly:
    """The model's pooler as the checks hand it to the runner: it takes the step's real rows only (the contract's
    "only the first num_scheduled_tokens rows are real"), as a pooler over every row would need."""

    def __init__(self, pooler: Any) -> None:
        self.pooler = pooler

    def __call__(self, hidden_states: torch.Tensor, pooling_metadata: Any) -> Any:
        real = int(pooling_metadata.get_pooling_cursor().num_scheduled_tokens_cpu.sum())  # host: no sync
        rows = hidden_states.shape[0] if isinstance(hidden_states, torch.Tensor) else None
        expect(rows == real, f"the pooler was handed {rows} rows of hidden states; the step has {real} tokens",
               expected=f"{real} rows (num_scheduled_tokens)", got=f"{rows} rows", hint=_PADDING_HINT)
        return self.pooler(hidden_states, pooling_metadata)


def _checked_model() -> TinyPoolingModel:
    model = _model()
    model.pooler = _RealRowsOnly(model.pooler)  # type: ignore[assignment]
    return model


def _found_right_outputs(want: list[torch.Tensor | None]) -> None:
    """The pooler outputs a check compared with ``want`` and found right: each reported as found right ([hidden] host, or None
    where the request did not finish)."""
    for t in want:
        found_right_tensor(t)


# ----------------------------------------------------------------------------- what a runner sends back


def _outputs_as_data(outputs: Any) -> dict:
    """A step's ``pooler_output`` as data: each entry's values (and whether its buffer is pinned), None, or its
    type's name; or what the whole was, when it is no list."""
    return tensors_as_data(outputs, lambda t: {"pinned": is_pinned_host(t)},
                           lambda item: f"tensor_of_{str(item.dtype).removeprefix('torch.')}"
                           if isinstance(item, torch.Tensor) else type(item).__name__, (list, tuple))


class _NotATensor:
    """An entry that was neither None nor a tensor: an instance of a class named as the entry's type was (reports
    name it so)."""

    def __repr__(self) -> str:
        return type(self).__name__


def _not_a_tensor(name: str) -> _NotATensor:
    return type(name if name.isidentifier() else "value", (_NotATensor,), {})()


def _outputs_back(seen: dict) -> list:
    """:func:`_outputs_as_data` read back: host tensors, Nones and :class:`_NotATensor` (a whole that was no list:
    one :class:`_NotATensor` naming it, which matches no batch)."""
    outputs = tensors_from_data(seen, _not_a_tensor)
    return [_not_a_tensor(seen["not_list"])] if outputs is None else outputs


def _log_as_data(device: Any, start: int = 0) -> list[list[str]]:
    """The simulated device's log from entry ``start``: (operation, stream, detail) each."""
    return [list(entry) for entry in device.log.entries[start:]]


def _log_text(entries: list[list[str]]) -> str:
    """A stream log as the simulated device prints it (``SimLog.__str__``)."""
    return "\n".join(f"{i:>3}  {stream:<14} {op:<18} {detail}" for i, (op, stream, detail)
                     in enumerate(entries)) or "(nothing)"


def _syncs_as_data(report: Any) -> dict:
    return {"count": report.count, "events": [[e.kind.value, e.op, e.where] for e in report.events]}


class _Seen(dict):
    """What a runner saw, read by a check in its order. A key the runner never reached, because the reader's code
    raised first (``crashed``), runs the runner again uncaught: the exception then reaches the check from the
    reader's line, as it would have in the notebook."""

    def __init__(self, data: dict, again: Callable[[], Any]) -> None:
        super().__init__(data)
        self._again = again

    def __missing__(self, key: str) -> Any:
        if self.get("crashed"):
            self._again()
            raise CheckFailed("your runner raised on this case once, and not when it ran again",
                              hint="an answer that depends on something outside its inputs cannot be checked: make "
                                   "the runner a function of the model and the batches it is handed")
        raise KeyError(key)

    def case(self, i: int) -> "_Seen":
        """The ``i``-th case's observations (``cases``), run again uncaught where the runner stopped before it."""
        cases = self["cases"]
        return _Seen(cases[i] if i < len(cases) else {"crashed": True}, self._again)


def _cpu_cases(rng: random.Random, device: Any = None) -> Iterator[tuple[str, PoolingBatch]]:
    device = simulated_device() if device is None else device
    yield ("a fixed batch of 3 requests, all finished",  # a copy on every seed: the platform's path is taken
           make_pooling_batch(3, rng=random.Random(3), partial_fraction=0.0, device=device))
    yield ("a first step where no request finishes (4 unfinished chunks)", _unfinished_batch(random.Random(5), device))
    yield from _batches(rng, 10, device)


# ----------------------------------------------------------------------------- runners: the reader's runner, where it lives


@runs_with_the_answer
def cpu_platform_outcomes(runner_cls: RunnerClass, seed: int, catch: bool = True) -> dict:
    """The reader's runner on a CPU platform, over :func:`_cpu_cases` of ``seed``: per case its result's type, its
    outputs and how often it called ``_sync_device()``; the CUDA streams it tried to create."""
    model, cases = _checked_model(), []
    with cpu_platform() as spy, _HostCopies() as copies:
        runner = runner_cls(model)
        synced, sync_device = [0], runner._sync_device
        copies_at_last_sync = [0]

        def counted_sync_device() -> None:
            synced[0] += 1
            copies_at_last_sync[0] = copies.count
            sync_device()

        runner._sync_device = counted_sync_device  # type: ignore[method-assign]
        for _, batch in _cpu_cases(random.Random(seed)):
            synced[0], copies.count, copies_at_last_sync[0] = 0, 0, 0
            try:
                result = runner.execute_model(batch)
            except RuntimeError as exc:
                if "CUDA" not in str(exc) and not catch:
                    raise
                cases.append({"cuda_error": str(exc)} if "CUDA" in str(exc) else {"crashed": True})
                break
            except Exception:
                if not catch:
                    raise
                cases.append({"crashed": True})
                break
            is_output = isinstance(result, ModelRunnerOutput)
            cases.append({"type": type(result).__name__, "is_output": is_output, "synced": synced[0],
                          "copied_after_last_wait": copies.count - copies_at_last_sync[0],
                          "outputs": _outputs_as_data(result.pooler_output) if is_output else None})
    return {"cases": cases, "streams_created": spy.created}


class _HostCopies(TorchFunctionMode):
    """Counts the copies to the host a CPU step makes (``.to("cpu")``, ``.cpu()``, ``copy_`` into a host tensor), so
    that the check can tell a wait after the copy (the baseline's, which XPU needs) from one before it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func is torch.Tensor.cpu or (func is torch.Tensor.copy_ and args and args[0].device.type == "cpu") or (
                func is torch.Tensor.to and "cpu" in (str(a) for a in (*args[1:], kwargs.get("device")))):
            self.count += 1
        return func(*args, **kwargs)


@runs_with_the_answer
def cuda_path_outcomes(runner_cls: RunnerClass, seed: int, catch: bool = True) -> dict:
    """The reader's runner on the simulated CUDA path, over 15 random batches of ``seed``, each output collected:
    per case what ``get_output()`` returned, and the stream log it added."""
    model, cases = _checked_model(), []
    with sim_cuda.simulated_cuda() as device:
        runner = runner_cls(model)
        for _, batch in _batches(random.Random(seed), 15):
            start = len(device.log.entries)
            try:
                output = resolve(runner.execute_model(batch))
            except Exception:
                if not catch:
                    raise
                cases.append({"crashed": True})
                break
            is_output = isinstance(output, ModelRunnerOutput)
            cases.append({"type": type(output).__name__, "is_output": is_output, "log": _log_as_data(device, start),
                          "req_ids": list(output.req_ids) if is_output else None,
                          "outputs": _outputs_as_data(output.pooler_output) if is_output else None})
    return {"cases": cases}


@runs_with_the_answer
def lazy_stream_outcome(runner_cls: RunnerClass, seed: int, catch: bool = True) -> dict:
    """A runner built, then 5 steps of 4 requests: the streams created after each, whether the getter returns the
    one stream it keeps, and the streams the copies ran on."""
    seen: dict[str, Any] = {}
    try:
        with sim_cuda.simulated_cuda() as device:
            runner = runner_cls(_checked_model())
            seen["by_constructor"] = device.streams_created
            rng, seen["after"] = random.Random(seed), []
            for _ in range(5):
                resolve(runner.execute_model(make_pooling_batch(4, rng=rng, device=simulated_device())))
                seen["after"].append(device.streams_created)
            first = runner._get_or_create_async_output_copy_stream()  # type: ignore[attr-defined]
            seen["same_twice"] = first is runner._get_or_create_async_output_copy_stream()  # type: ignore
            seen["kept"] = first is runner.async_output_copy_stream
            seen["name"] = str(getattr(first, "name", first))
            seen["copy_streams"] = sorted({stream for op, stream, _ in device.log.entries if op == "copy to host"})
    except Exception:
        if not catch:
            raise
        seen["crashed"] = True
    return seen


@runs_with_the_answer
def sync_outcomes(runner_cls: RunnerClass, seed: int, catch: bool = True) -> dict:
    """Steps of 1, 16 and 64 requests (some unfinished chunks): the syncs inside ``execute_model``, what the result
    was, the waits inside ``get_output()`` and the host waits logged, the outputs, the log."""
    model, cases, rng = _checked_model(), [], random.Random(seed)
    with sim_cuda.simulated_cuda() as device:
        runner = runner_cls(model)
        for num_reqs in (1, 16, 64):
            batch = make_pooling_batch(num_reqs, rng=rng, partial_fraction=0.3 if num_reqs > 1 else 0.0,
                                       device=simulated_device())
            seen: dict[str, Any] = {}
            cases.append(seen)
            try:
                with count_syncs(simulate=True) as in_pool:
                    result = runner.execute_model(batch)
                seen.update(in_pool=_syncs_as_data(in_pool), type=type(result).__name__,
                            has_get_output=hasattr(result, "get_output"))
                if not seen["has_get_output"]:
                    break
                with count_syncs(simulate=True) as in_get:
                    output = result.get_output()
            except Exception:
                if not catch:
                    raise
                seen["crashed"] = True
                break
            is_output = isinstance(output, ModelRunnerOutput)
            seen.update(get_ops=[e.op for e in in_get.events], log=_log_as_data(device), is_output=is_output,
                        output_type=type(output).__name__,
                        waits=[detail for op, _, detail in device.log.entries if op == "host waits"],
                        outputs=_outputs_as_data(output.pooler_output) if is_output else None)
    return {"cases": cases}


@runs_with_the_answer
def ordering_outcome(runner_cls: RunnerClass, seed: int) -> dict:
    """One step of 6 requests, its output collected: the stream log and each ``wait_stream`` (waiter, waited for,
    the log entry it came at)."""
    with sim_cuda.simulated_cuda() as device:
        runner = runner_cls(_checked_model())
        resolve(runner.execute_model(make_pooling_batch(6, rng=random.Random(seed), device=simulated_device())))
        return {"log": _log_as_data(device), "edges": [[e.waiter, e.waits_for, e.at] for e in device.edges]}


@runs_with_the_answer
def engine_order_outcome(runner_cls: RunnerClass, seed: int) -> dict:
    """As the engine runs it: step 0 queued, step 1 queued, then step 0's output collected, then step 1's. What was
    recorded when, which of step 1's copies had landed by step 0's wait, the waits, both outputs and the log."""
    with sim_cuda.simulated_cuda() as device:
        runner = runner_cls(_checked_model())
        rng = random.Random(seed)
        batches = [make_pooling_batch(n, rng=rng, device=simulated_device()) for n in (5, 3)]
        first = runner.execute_model(batches[0])
        recorded_in_pool = any(op == "record event" for op, _, _ in device.log.entries)
        queued_by_first = device.copies_queued()
        second = runner.execute_model(batches[1])
        queued_by_second = device.copies_queued() - queued_by_first
        # an event that covers no copy (recorded on the compute stream, after leaving the side stream's block)
        empty_events = [detail for op, _, detail in device.log.entries if op == "record event"
                        and detail.startswith("after 0 queued copies")]
        logged = len(device.log.entries)
        outputs = [resolve(first)]
        first_waits = [detail for op, _, detail in device.log.entries[logged:] if op == "host waits"]
        # step 0's wait covers step 0's copies alone: an event shared between steps, recorded again by step 1, covers
        # step 1's copies too, and the host waits for step 1's forward as in the synchronous runner
        landed_early = queued_by_second - device.copies_queued()
        outputs.append(resolve(second))
        return {"asynchronous": hasattr(first, "get_output"), "recorded_in_pool": recorded_in_pool,
                "recorded_anywhere": any(op == "record event" for op, _, _ in device.log.entries),
                "queued_by_second": len(queued_by_second), "landed_early": len(landed_early),
                "empty_events": bool(empty_events), "first_waits": first_waits, "log": _log_as_data(device),
                "outputs": [_outputs_as_data(o.pooler_output) for o in outputs]}


@runs_with_the_answer
def nothing_finished_outcome(runner_cls: RunnerClass, seed: int) -> dict:
    """A first step where no request finishes: the side streams it created, its syncs, its outputs."""
    with sim_cuda.simulated_cuda() as device:
        runner = runner_cls(_checked_model())
        before = device.streams_created  # a stream the constructor made is the lazy-stream check's to name
        batch = _unfinished_batch(random.Random(seed))  # built before counting: its upload is the engine's
        with count_syncs(simulate=True) as report:
            output = resolve(runner.execute_model(batch))
        return {"streams": device.streams_created - before, "syncs": [e.op for e in report.events],
                "outputs": _outputs_as_data(output.pooler_output)}


@runs_with_the_answer
def memory_outcome(runner_cls: RunnerClass, seed: int) -> dict:
    """One step of 8 requests: whether the device tensors the copies read were alive until ``get_output()``, how
    many still are after it (and which stream's ``record_stream`` holds them), and which host buffers are pinned."""
    model = _checked_model()
    with _collecting_what_the_case_makes(), sim_cuda.simulated_cuda() as device:
        runner = runner_cls(model)
        batch = make_pooling_batch(8, rng=random.Random(seed), device=simulated_device())
        with watch_pooler_outputs(model) as raw_refs:
            result = runner.execute_model(batch)
        gc.collect()
        kept = device.memory_kept(raw_refs)
        watched = device.watch_frees(raw_refs)
        output = result.get_output()
        gc.collect()
        alive = [r() for r in raw_refs if r() is not None]
        held_by = device.held_by(alive)
        return {"kept": kept, "freed_before_wait": device.freed_before_a_wait(watched), "alive": len(alive),
                "held_by": held_by,
                "outputs": _outputs_as_data(output.pooler_output)}


# ----------------------------------------------------------------------------- the checks


def _check_cpu_platform(runner_cls: RunnerClass, rng: random.Random) -> None:
    seed = rng.randrange(2**31)
    seen = _Seen(cpu_platform_outcomes(runner_cls, seed), lambda: cpu_platform_outcomes(runner_cls, seed, False))
    model = _model(HOST)
    for i, (case, batch) in enumerate(_cpu_cases(random.Random(seed), HOST)):
        got = seen.case(i)
        if "cuda_error" in got:
            expect(False, "the CPU platform tried to create a CUDA stream", case=case,
                   got=f"RuntimeError: {got['cuda_error']}", hint="only the CUDA-like path needs the side stream: "
                   "check current_platform.is_cuda_alike() before asking for it, as vLLM's _pool does after #39113")
        expect(got["is_output"], "on a CPU platform _pool returns a ModelRunnerOutput",
               case=case, got=got["type"], hint="CPU and XPU runners copy synchronously and return "
               "the output itself; there is no event to wait on")
        want = _pool_reference(model, batch)
        outputs = _outputs_back(got["outputs"])
        expect(_same(outputs, want), "wrong pooler_output" + _first_wrong(outputs, want), case=case,
               expected=_describe(want, outputs), got=_describe(outputs, want),
               hint=_wrong_output_hint(outputs, want, []))
        _found_right_outputs(want)
        if not any(t is not None for t in want):  # nothing finished: nothing to copy, nothing to wait for
            expect(got["synced"] == 0, "a CPU step with nothing to copy called self._sync_device()", case=case,
                   expected="no wait: [None] per request at once", got=f"{got['synced']} call(s)",
                   hint="ask whether anything finished before the platform's path: a step that copies nothing "
                        "returns its Nones at once on every platform (on XPU that wait would drain the device)"
                        + (". With no request at all, any(finished) is False where all(finished) is True"
                           if not want else ""))
        else:
            expect(got["synced"] >= 1, "the CPU path copied without self._sync_device()", case=case,
                   expected="a call of self._sync_device() after the copy", got="none",
                   hint="on a CPU or XPU platform _pool copies the finished outputs and then calls "
                        "self._sync_device(), as vLLM's does: on XPU the copy is not done until then")
            expect(got.get("copied_after_last_wait", 0) == 0, "the CPU path waited before its copy, not after it",
                   case=case, expected="self._sync_device() after _copy_pooler_output_to_cpu(...)",
                   got=f"{got['copied_after_last_wait']} copy(ies) to the host after the last wait",
                   hint="the baseline copies, then waits: on XPU the non-blocking copy is done only once "
                        "self._sync_device() has returned, so a wait before it leaves the buffers unfilled")
    expect_equal(seen["streams_created"], 0, what="the number of CUDA streams created on a CPU platform", case="10 steps")


def _early_read_hint(entries: list[list[str]]) -> str:
    """Why the host read the buffers before the copy landed, from the stream log: which stream recorded the event
    the host waited on, and which ran the copies."""
    copies = {stream for op, stream, _ in entries if op == "copy to host"}
    records = [stream for op, stream, _ in entries if op == "record event"]
    if records and copies and records[-1] not in copies:
        return (f"the event was recorded on the {records[-1]} stream, but the copies ran on "
                f"{', '.join(sorted(copies))}: an event covers only the work of the stream it is recorded on. Record "
                f"it inside the `with torch.cuda.stream(side):` block, after the copies")
    if not records:
        return "no event was recorded: record one on the side stream after the copies, and wait on it in get_output()"
    return ("garbage means the host read the buffers before the copy landed: wait on the event recorded after the "
            "copies, then return them")


def _check_cuda_path(runner_cls: RunnerClass, rng: random.Random) -> None:
    seed = rng.randrange(2**31)
    seen = _Seen(cuda_path_outcomes(runner_cls, seed), lambda: cuda_path_outcomes(runner_cls, seed, False))
    model, log = _model(HOST), []
    for i, (case, batch) in enumerate(_batches(random.Random(seed), 15, HOST)):
        got = seen.case(i)
        log += got["log"]
        want = _pool_reference(model, batch)
        expect(got["is_output"], "get_output() must return the ModelRunnerOutput", case=case, got=got["type"])
        expect_equal(got["req_ids"], batch.req_ids, what="req_ids", case=case)
        outputs = _outputs_back(got["outputs"])
        right = _same(outputs, want)
        expect(right, "wrong pooler_output after get_output()" + ("" if right else _first_wrong(outputs, want)), case=case,
               expected=_describe(want, outputs), got=_describe(outputs, want),
               hint="" if right else _wrong_output_hint(outputs, want, log))
        _found_right_outputs(want)


def _first_wrong(got: list, want: list) -> str:
    """Where two outputs part: the first request whose entry differs (a long batch shows only its first entries)."""
    i = _first_difference(got, want)
    if i is None:
        return ""
    if i < min(len(got), len(want)):
        return (f" (first at request {i} of {len(want)}: expected {_describe([want[i]])[1:-1]}, "
                f"got {_describe([got[i]])[1:-1]})")
    return f" ({len(got)} entries for {len(want)} requests)"


def _holds_garbage(outputs: Any) -> bool:
    """Whether a host output holds what its buffer held before the copy landed: it was read (or copied) too early."""
    return any(bool((t == sim_cuda.GARBAGE).any()) for t in (outputs or []) if isinstance(t, torch.Tensor))


def _wrong_output_hint(got: Any, want: list, log: list[list[str]]) -> str:
    """Why the outputs are wrong: read too early (the buffers hold the simulation's garbage), or shaped wrong."""
    if _holds_garbage(got):
        return _early_read_hint(log)
    if not isinstance(got, (list, tuple)) or len(got) != len(want):
        return "pooler_output has one entry per request: its pooled vector, or None for a request that did not finish"
    if any(g is not None and w is None for g, w in zip(got, want)):
        return ("a request that has not finished gets None: take which requests finished from the host-side "
                "finished mask (batch.metadata.get_pooling_cursor().get_finished_mask()), not from the batch size")
    if any(g is None and w is not None for g, w in zip(got, want)):
        return ("a request that finished this step gets its pooled vector, not None: look at the finished mask (a "
                "step copies when any request finished, and only a step with none returns its Nones at once)")
    return "compare each entry with the request's: a pooled vector where it finished, None where it did not"


def _check_lazy_stream(runner_cls: RunnerClass, rng: random.Random) -> None:
    seed = rng.randrange(2**31)
    case = "a runner built, then 5 steps of 4 requests"  # named before the call: a crash reports it
    seen = _Seen(lazy_stream_outcome(runner_cls, seed), lambda: lazy_stream_outcome(runner_cls, seed, False))
    expect_equal(seen["by_constructor"], 0, what="the number of streams created by the constructor", case=case,
                 hint="create the side stream on first use, in _get_or_create_async_output_copy_stream()")
    after = seen["after"]
    for step in range(5):
        if step == len(after):  # the runner raised in this step: run again, to raise from the reader's line
            seen["kept"]
        expect_equal(after[step], 1, what=f"the number of streams created after {step + 1} step(s)", case=case,
                     hint="create it once, keep it in self.async_output_copy_stream, reuse it")
    expect(seen["same_twice"], "_get_or_create_async_output_copy_stream() returned a different stream on a second call")
    expect(seen["kept"], "the stream must be kept in self.async_output_copy_stream")
    # No asynchronous copy at all (a .cpu(), a pageable buffer) is the business of the sync and ordering
    # checks, which name it; this one is about where the copies that were queued ran.
    expect(set(seen["copy_streams"]) <= {seen["name"]}, "the copies must run on the side stream",
           expected=seen["name"], got=seen["copy_streams"],
           hint="queue the copies inside `with torch.cuda.stream(side_stream):`")


def _check_syncs(runner_cls: RunnerClass, rng: random.Random) -> None:
    seed = rng.randrange(2**31)
    seen = _Seen(sync_outcomes(runner_cls, seed), lambda: sync_outcomes(runner_cls, seed, False))
    model, batches = _model(HOST), random.Random(seed)
    for i, num_reqs in enumerate((1, 16, 64)):
        case = f"{num_reqs} request{'s' * (num_reqs != 1)}"  # named before the call: a hang reports it
        # unfinished chunks among the finished ones (never all of them: a step must copy something here)
        batch = make_pooling_batch(num_reqs, rng=batches, partial_fraction=0.3 if num_reqs > 1 else 0.0, device=HOST)
        want = _pool_reference(model, batch)
        unfinished = sum(t is None for t in want)
        counted = f"the counted step: {num_reqs} request{'s' * (num_reqs != 1)}, {unfinished} of them unfinished chunks"
        got = seen.case(i)
        in_pool = got["in_pool"]
        in_sync_device = any(where.endswith("in _sync_device") for _, _, where in in_pool["events"])
        expect(in_pool["count"] == 0, f"{in_pool['count']} sync(s) inside execute_model/_pool", expected=0,
               got="; ".join(f"{kind} ({op}) at {where}" for kind, op, where in in_pool["events"][:3]),
               case=case, hint=("the line named is inside self._sync_device(), which your _pool calls on the CUDA "
                                "path: " if in_sync_device else "") + "on the CUDA path _pool only queues work and returns: no "
               "_sync_device(), no .cpu(), no wait on the copy's event (that wait is get_output()'s, a step later), "
               "and no device-to-host copy into pageable memory (a non_blocking copy to the host is asynchronous "
               "only into pinned memory)")
        expect(got["has_get_output"], "the CUDA path returns an object with get_output()", got=got["type"], case=case,
               hint=f"in this step {num_reqs - unfinished} of {num_reqs} requests finished: a step with any finished "
                    "request copies, on the CUDA path as an AsyncPoolingOutput; only a step with none finished "
                    "returns its Nones at once (any(), not all())")
        ops = got["get_ops"]
        expect(not any(op.startswith("Event.query") for op in ops), "get_output() polls event.query() in a loop",
               got=ops, case=case,
               hint="a loop on query() keeps the host spinning until the copy lands: the busy-poll a blocking "
                    "event avoids (vLLM since #47081). Wait with event.synchronize() on a "
                    "torch.cuda.Event(blocking=True): the host sleeps instead")
        if not ops:
            wait_hint = ("nothing waited: get_output() must wait for the copies before it hands the host their "
                         "buffers; wait on the event recorded after them")
        elif all(op.startswith("Event.synchronize") for op in ops):
            wait_hint = ("the event's copies have landed after the first wait: a second wait on it is one wait too "
                         "many (on a GPU, a call into the driver each); wait once")
        else:
            wait_hint = ("torch.cuda.synchronize() (or a stream's) would also wait for the NEXT step's forward; "
                         "wait on the event recorded after the copies, once")
        expect(len(ops) == 1 and ops[0].startswith("Event.synchronize"),
               "get_output() must wait exactly once, on the copy's event", expected="1 x Event.synchronize",
               got=ops or "no wait", case=case, hint=wait_hint)
        waits = got["waits"]
        expect(bool(waits) and waits[-1].endswith("(blocking)"), "the event waited on is not a blocking one",
               expected="torch.cuda.Event(blocking=True)", got="torch.cuda.Event()", case=case,
               hint="a default event's synchronize() never sleeps: it spins or yields, as the device's scheduling "
                    "flag decides (spinning, holding a core, where the host has cores to spare); create it with "
                    "torch.cuda.Event(blocking=True), as vLLM does since #47081: the host sleeps")
        # the step whose syncs count is a step whose outputs count: a shortcut taken only while counted fails here
        outputs = _outputs_back(got["outputs"]) if got["is_output"] else None
        right = outputs is not None and _same(outputs, want)
        expect(right, "wrong pooler_output from the counted step", expected=_describe(want, outputs),
               got=_describe(outputs, want) if outputs is not None else got["output_type"], case=counted,
               hint="" if right else _wrong_output_hint(outputs, want, got["log"]) if outputs is not None
               else _early_read_hint(got["log"]))
        _found_right_outputs(want)


def _wait_text(edge: tuple) -> str:
    """A wait between streams as the log shows it: which waited for which (a ``wait_stream`` or a ``wait_event``)."""
    waiter, waits_for = edge[0], edge[1]
    return f"{waiter} waits for {waits_for} (a wait_stream or a wait_event)"


def _check_ordering(runner_cls: RunnerClass, rng: random.Random) -> None:
    case = "one step of 6 requests, its copies queued"  # named before the call: a crash reports it
    seen = ordering_outcome(runner_cls, rng.randrange(2**31))
    entries, log = seen["log"], _log_text(seen["log"])
    edges = [(waiter, waits_for, at) for waiter, waits_for, at in seen["edges"]]
    ops = [op for op, _, _ in entries]
    copies = [i for i, op in enumerate(ops) if op == "copy to host"]
    expect(bool(copies), "no asynchronous copy to the host was queued on a stream",
           hint="a copy into pageable memory, or a blocking one (.cpu(), .to('cpu')), runs at once and queues "
                "nothing: copy into pinned host memory with non_blocking=True, as _copy_pooler_output_to_cpu(raw, "
                "finished) does", case=case)
    side = {stream for op, stream, _ in entries if op == "copy to host"}
    itself = [e for e in edges if e[0] == e[1]]
    expect(not itself, "the side stream waited on itself, so the copies are not ordered after the forward",
           got=_wait_text(itself[0]) if itself else "",
           hint="inside `with torch.cuda.stream(side):`, torch.cuda.current_stream() IS the side stream: capture "
                "the compute stream before you enter the side stream (compute = torch.cuda.current_stream()), "
                "then side.wait_stream(compute) inside", case=case)
    waits = [at for waiter, waits_for, at in edges if waiter in side and waits_for == "default"]
    backwards = [e for e in edges if e[0] == "default" and e[1] in side]
    expect(not (backwards and not waits), "the compute stream waits for the side stream: the wrong way round",
           got=_wait_text(backwards[0]) if backwards else "",
           hint="the side stream waits for the compute stream: compute = torch.cuda.current_stream() before "
                "`with torch.cuda.stream(side):` (inside it the current stream is the side stream), then "
                "side.wait_stream(compute)",
           case=case)
    expect(not backwards, "the compute stream waits for the copies: the next forward queues behind them",
           got=_wait_text(backwards[0]) if backwards else "",
           hint="the compute stream never waits for the side stream: that wait would put the next step's forward "
                "behind this step's copies, the overlap the side stream is for. What keeps the raw output alive "
                "until the copies are done is a reference held by the output object (or record_stream), not a "
                "wait", case=case)
    expect(bool(waits) and waits[0] < copies[0], "the side stream must wait for the compute stream before "
           "copying", got=log, hint="compute = torch.cuda.current_stream() before entering the side "
           "stream, then side.wait_stream(compute) before the copies: otherwise they may read hidden states the "
           "forward has not written yet", case=case)
    records = [i for i, op in enumerate(ops) if op == "record event"]
    expect(bool(records) and records[-1] > copies[-1], "the event must be recorded after the copies",
           got=log, hint="record the event on the side stream after queueing the copies, so "
           "waiting on it waits for them", case=case)
    on = entries[records[-1]][1]
    expect(on in side, f"the event was recorded on the {on} stream, but the copies ran on {', '.join(sorted(side))}",
           got=log, hint="an event covers only the work queued on the stream it is recorded on: "
           "record it inside the `with torch.cuda.stream(side):` block, after the copies (event.record() "
           "records on the current stream)", case=case)


def _check_engine_order(runner_cls: RunnerClass, rng: random.Random) -> None:
    """As the engine runs it: step 0 queued, step 1 queued, then step 0's output collected, then step 1's."""
    seed = rng.randrange(2**31)
    case = "step 0 queued, step 1 queued, then step 0's get_output(), then step 1's"
    seen = engine_order_outcome(runner_cls, seed)
    batches_rng = random.Random(seed)
    batches = [make_pooling_batch(n, rng=batches_rng, device=HOST) for n in (5, 3)]
    if seen["asynchronous"] and seen["recorded_anywhere"]:  # no event recorded at all: the wait-once check says so
        expect(seen["recorded_in_pool"], "the event is recorded in get_output(), not when step 0's copies are queued",
               case=case, got="no event recorded while step 0 was queued",
               hint="an event recorded in get_output() comes after step 1's forward and copies were queued: waiting "
                    "on it waits for them too, and the overlap is lost. Record it in _pool (in the async output's "
                    "constructor), on the side stream, right after the copies")
    first_waits = seen["first_waits"]
    wide = [detail for detail in first_waits if not detail.startswith("Event.")]
    expect(not seen["landed_early"], "step 0's get_output() also waited for step 1's copies", case=case,
           expected="step 1's copies still in flight after step 0's get_output()",
           got=f"{seen['landed_early']} of step 1's {seen['queued_by_second']} copies landed by step 0's wait "
               f"({', '.join(first_waits) or 'no wait'})",
           hint=f"{wide[0]} waits for all the work queued so far, step 1's copies too, not only this step's: wait on "
                "the event this step recorded after its own copies" if wide else
                "each step's output records its own event (torch.cuda.Event(blocking=True) in the constructor): an "
                "event kept and recorded again by the next step (one made once, on the runner, the stream or the "
                "module) moves forward, and waiting on it waits for that step's work too")
    model = _model(HOST)
    for n, (batch, output) in enumerate(zip(batches, map(_outputs_back, seen["outputs"]))):
        want = _pool_reference(model, batch)
        cause = ("the event the host waited on covers no copy (it was recorded after 0 queued copies): record it "
                 "right after the copies, on the side stream (recorded before them, or on another stream, it covers "
                 "none)" if seen["empty_events"] else
                 _early_read_hint(seen["log"]) if _holds_garbage(output) else  # read before the wait
                 "each step's output holds its own copies: buffers shared between steps are overwritten by the "
                 "next step before the first is collected")
        expect(_same(output, want), f"wrong pooler_output of step {n}", case=case,
               expected=_describe(want, output), got=_describe(output, want), hint=cause)
        _found_right_outputs(want)


def _unfinished_batch(rng: random.Random, device: Any = None) -> PoolingBatch:
    """Only first chunks of longer prompts: no request finishes in this step."""
    while True:
        batch = make_pooling_batch(4, rng=rng, max_len=12, partial_fraction=1.0,
                                   device=simulated_device() if device is None else device)
        if not any(batch.metadata.get_pooling_cursor().get_finished_mask()):
            return batch


def _check_nothing_finished(runner_cls: RunnerClass, rng: random.Random) -> None:
    case = "a first step where no request finishes (4 unfinished chunks)"
    seen = nothing_finished_outcome(runner_cls, rng.randrange(2**31))
    expect_equal(seen["streams"], 0, what="the number of side streams created for a step with nothing to copy",
                 case=case, hint="a step where nothing finished returns its output at once, [None] per request, "
                                 "before asking for the side stream: there is nothing to copy or wait for")
    expect(not seen["syncs"], "a step with nothing to copy waited", case=case, expected="no wait",
           got="; ".join(seen["syncs"]),
           hint="return the ModelRunnerOutput itself (pooler_output [None] per request) when nothing finished")
    expect_equal(_outputs_back(seen["outputs"]), [None] * 4, what="pooler_output", case=case)


@contextlib.contextmanager
def _collecting_what_the_case_makes() -> Iterator[None]:
    """``gc.collect()`` within looks only at what was made inside: the heap from before (torch, the lab, the whole
    process, half a second per collection in a test run) is frozen meanwhile. A tensor the case made is freed or kept
    as before: kept only if something holds it, old or new."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _check_memory(runner_cls: RunnerClass, rng: random.Random) -> None:
    case = "one step of 8 requests, its output collected"  # named before the call: a crash reports it
    seen = memory_outcome(runner_cls, rng.randrange(2**31))
    expect(seen["kept"], "the device tensors were freed while the copy reads them",
           hint="keep a reference to the raw pooler output in the async output until get_output() has "
                "waited, or mark it with raw.record_stream(side_stream): the caching allocator would otherwise "
                "hand their memory to the next step", case=case)
    expect(not seen.get("freed_before_wait"), f"get_output() released {seen.get('freed_before_wait')} device "
           "tensor(s) before its wait", case=case, expected="released after event.synchronize()",
           got="released before it",
           hint="the side stream may still be copying from them until the event's wait returns: wait first, then "
                "drop the reference")
    alive, held_by = seen["alive"], seen["held_by"]
    if alive and held_by:
        expect(False, f"record_stream kept {alive} device tensor(s) for the {held_by[0]} stream",
               case=case,
               hint="record_stream marks a block as in use by the stream you pass, until that stream's queued work "
                    "is done: pass the side stream that runs the copy (raw.record_stream(side_stream)), not the "
                    "compute stream, which the next step keeps busy")
    # the buffers first: a host tensor made from a device row (a .to("cpu") of it) may hold that row itself
    items = seen["outputs"].get("items", [])
    unpinned = [i for i, item in enumerate(items) if item is not None and not item.get("pinned", False)]
    early = _holds_garbage(_outputs_back(seen["outputs"]))
    expect(not unpinned, f"host buffers {unpinned} are not pinned",
           hint="these are not the buffers the copies filled: a copy of them made before the wait (a .clone(), "
                "wherever it is: in __init__, in _pool or in get_output() before synchronize()) holds what they "
                "held then; hand back the buffers _copy_pooler_output_to_cpu returned, read after the wait"
                if early else "a non-blocking copy to pageable memory is synchronous; "
                "let _copy_pooler_output_to_cpu allocate pinned buffers", case=case)
    expect(not alive, f"{alive} device tensor(s) still referenced after get_output()",
           hint="drop every reference once the copy has landed: the output's own (del self._raw... in "
                "get_output(), after the wait), and any other you kept (on the runner, in a list): nothing but the "
                "output needs the raw tensor, and only until its wait", case=case)


# A stream or event made when the reader's cell ran (at module level) is torch's own, made outside the simulated GPU
# the checks run the runner on: torch's message names the type, not the cause.
_MADE_AT_IMPORT_HINT = ("a CUDA stream or event made when your cell ran (at module level, or as a default argument) "
                        "is a real one, made outside the simulated GPU the checks run your runner on: make streams and "
                        "events inside the methods, when a step needs them")
# A class named when the cell ran (an alias of torch.Event, a functools.partial of it) is torch's real one too: on a
# machine without CUDA, torch's error speaks of the driver. On a GPU it is right; here it is the simulation's limit.
_BOUND_AT_IMPORT_HINT = ("an event class bound when your cell ran (an alias such as _Ev = torch.Event, a "
                         "functools.partial of it) is torch's real one, bound before the checks' simulated GPU "
                         "replaced it: on a GPU your code is right, but here name torch.cuda.Event or torch.Event "
                         "inside the method that makes the event")
_MADE_AT_IMPORT = (("expected stream to be a torch.Stream or torch.cuda.Stream", _MADE_AT_IMPORT_HINT),
                   ("Tried to instantiate dummy base class", _MADE_AT_IMPORT_HINT),
                   ("CUDA driver version is insufficient", _BOUND_AT_IMPORT_HINT),
                   ("backend doesn't support events", _BOUND_AT_IMPORT_HINT),
                   ("does not match recording stream's device type", _BOUND_AT_IMPORT_HINT),
                   ("Found no NVIDIA driver", _BOUND_AT_IMPORT_HINT))

CHECKS_2_1 = [
    Check("2.1", "CPU platform: right outputs, no CUDA stream, nothing raised", _check_cpu_platform, id="cpu-platform"),
    Check("2.1", "CUDA path: right outputs after get_output() on random batches", _check_cuda_path, id="cuda-path",
          crash_hints=_MADE_AT_IMPORT),
    Check("2.1", "the side stream is created on first use, once, and reused", _check_lazy_stream, id="lazy-stream",
          crash_hints=_MADE_AT_IMPORT),
    Check("2.1", "no sync in _pool; get_output() waits once, on the event", _check_syncs, id="syncs",
          crash_hints=_MADE_AT_IMPORT),
    Check("2.1", "the copy waits for the compute stream; the event is recorded after it", _check_ordering,
          id="ordering", crash_hints=_MADE_AT_IMPORT),
    Check("2.1", "the engine's order: two steps queued, then their outputs collected", _check_engine_order,
          id="engine-order", crash_hints=_MADE_AT_IMPORT),
    Check("2.1", "a step where nothing finished: no side stream, no wait", _check_nothing_finished,
          id="nothing-finished"),
    Check("2.1", "device tensors kept until get_output(), then released; host buffers pinned", _check_memory,
          id="memory", crash_hints=_MADE_AT_IMPORT),
]


def check_runner(runner_cls: RunnerClass, seed: int | None = None) -> CheckReport:
    """Exercise 2.1: ``runner_cls`` is the reader's runner class (a ``PoolingModelRunner``)."""
    return run_checks("Exercise 2.1 — lazy stream, _pool, AsyncPoolingOutput", CHECKS_2_1, runner_cls, seed=seed)


# ----------------------------------------------------------------------------- Exercise 2.2: spot the bug


def _evidence_place(where: str) -> str:
    """Where a sync was made, as the evidence shows it: a line of the broken runners' own file (which holds the
    answers) only as the function it is in."""
    path, _, function = where.partition(" in ")
    if not path.split(":")[0].endswith("spot_the_bug.py"):
        return where
    # the runners' own methods are _pool's helpers; __init__ there is the asynchronous output's, made in _pool
    return "the asynchronous output's constructor (in _pool)" if function == "__init__" else f"the runner's {function}"


def evidence_text(evidence: dict[str, Any], leave_out: tuple[str, ...] = ("stream ops",)) -> str:
    """:func:`inspect_runner`'s evidence as the lab prints it: a line per key, a value of several lines (the stream
    log) starting on the line under its key."""
    return "\n".join(f"{key}: " + (f"\n{value}" if "\n" in str(value) else str(value))
                     for key, value in evidence.items() if key not in leave_out)


def inspect_runner(runner_cls: RunnerClass, num_reqs: int = 3, seed: int = 0) -> dict[str, Any]:
    """Run one step of ``runner_cls`` under simulated CUDA and gather the evidence a profiler would show."""
    model = _model()
    batch = make_pooling_batch(num_reqs, rng=random.Random(seed), device=simulated_device())
    want = _pool_reference(model, batch)
    with _collecting_what_the_case_makes(), sim_cuda.simulated_cuda() as device, watch_pooler_outputs(model) as refs:
        runner = runner_cls(model)
        with count_syncs(simulate=True) as in_pool:
            result = runner.execute_model(batch)
        gc.collect()
        alive_before = sum(r() is not None for r in refs)
        with count_syncs(simulate=True) as in_get:
            output = resolve(result)
    return {
        "outputs right": _same(output.pooler_output, want),
        "outputs": _describe(output.pooler_output),
        "syncs in _pool": [f"{e.kind.value} at {_evidence_place(e.where)}" for e in in_pool.events],
        "waits in get_output": [e.op for e in in_get.events],
        "device tensors alive until get_output": f"{alive_before} of {len(refs)}",
        "stream ops": device.log.ops(),
        "stream log": str(device.log),
    }


@answer_key("2.2", role="answer key (its reading of the evidence)")
def _symptoms(evidence: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    """Each label of ``BUG_LABELS``: does its symptom show in the evidence, and the evidence that says so."""
    alive, total = evidence["device tensors alive until get_output"].split(" of ")
    waits = evidence["waits in get_output"]
    ordered = "wait_stream" in evidence["stream ops"]
    wrong = not evidence["outputs right"]
    # Wrong outputs say the host read early only where the copy came after the forward: an unordered copy may run
    # before the forward writes the outputs (on a GPU, and on the device process), and copy what the memory held.
    read_early = (wrong and ordered, f"outputs right: {evidence['outputs right']}" + (
        "" if ordered or not wrong else ", but with no wait_stream the copy may have run before the forward wrote "
        "them: wrong outputs say nothing then of when the host read them"))
    return {
        "early read": read_early,
        "pageable": (any("pageable" in s for s in evidence["syncs in _pool"]),
                     f"syncs in _pool: {evidence['syncs in _pool'] or 'none'}"),
        "unordered": (not ordered, f"the stream log {'has' if ordered else 'has no'} wait_stream"),
        "freed early": (alive != total, f"device tensors alive until get_output: {alive} of {total}"),
        # a wait for the whole device: no wait at all is another runner's symptom (it reads without waiting)
        "over-wait": (any(w.startswith("torch.cuda.synchronize") for w in waits),
                      f"waits in get_output: {waits or 'none'}"),
    }


@answer_key("2.2", role="answer key")
def _diagnose(evidence: dict[str, Any]) -> str:
    """The label the evidence points to, or ``"no bug"``: the cause among the symptoms that show.

    ``BUG_LABELS`` lists the labels causes first: a runner that reads its outputs without waiting (early read) also
    makes none of get_output()'s waits and lets its device tensors go, so the first label that shows is the cause.
    """
    return next((label for label, (shows, _) in _symptoms(evidence).items() if shows), "no bug")


def _why_not(runner: str, label: str, evidence: dict[str, Any]) -> str:
    """Why ``label`` is not ``runner``'s bug, from its evidence, without naming the right label."""
    shows, fact = _symptoms(evidence)[label]
    if not shows:
        return f"{runner}: you said {label!r}, but the evidence shows no such thing ({fact})"
    how = {"freed early": " (the count is taken when get_output() runs: a runner that never waits for its copy, "
                          "or reads the outputs before it, has no reason left to hold its device tensors)",
           "unordered": ""}.get(label, "")
    return (f"{runner}: you said {label!r}; that shows ({fact}){how}, but it is a consequence: another symptom of "
            f"{runner} explains it. Fix {label!r} in your head: the other symptom would still show; fix that one, and "
            f"this one goes too")


def _check_diagnosis(answer: Callable[[], dict[str, str]], rng: random.Random) -> None:
    labels = answer()
    labels = dict(labels) if isinstance(labels, Mapping) else labels  # any mapping of runner to label
    expect(isinstance(labels, dict) and set(labels) == set(SPOT_THE_BUG),
           f"label every runner, {min(SPOT_THE_BUG)} to {max(SPOT_THE_BUG)}",
           expected=sorted(SPOT_THE_BUG), got=sorted(labels) if isinstance(labels, dict) else type(labels).__name__)
    unknown = {k: v for k, v in labels.items() if v not in BUG_LABELS}
    expect(not unknown, "use the labels of ch2.BUG_LABELS", got=unknown, expected=sorted(BUG_LABELS))
    evidence = {name: inspect_runner(cls) for name, cls in SPOT_THE_BUG.items()}
    wrong = [k for k in SPOT_THE_BUG if labels[k] != _diagnose(evidence[k])]
    # each runner's reason in the message itself, which is never shortened: five reasons outrun a value's room
    expect(not wrong, f"{len(wrong)} of {len(SPOT_THE_BUG)} diagnosis(es) off. "
           + "; ".join(_why_not(k, labels[k], evidence[k]) for k in wrong),
           hint="look at each runner's evidence: are the values right, where are the syncs, what does the "
                "stream log show, and which waits does get_output() do?",
           share=1 - len(wrong) / len(SPOT_THE_BUG),  # each runner named right earns its share
           case=f"the {len(SPOT_THE_BUG)} runners' evidence, one simulated step each")
    found_right(labels)  # every right answer says the same


CHECKS_2_2 = [Check("2.2", "each broken runner's bug named from the evidence", _check_diagnosis, timeout_s=60,
                    random=False, id="diagnosis")]


def check_diagnosis(my_diagnosis: Callable[[], dict[str, str]], seed: int | None = None) -> CheckReport:
    """Exercise 2.2: the reader's label for each runner of ``SPOT_THE_BUG``, against the evidence."""
    return run_checks("Exercise 2.2 — spot the bug", CHECKS_2_2, my_diagnosis, seed=seed)


# ----------------------------------------------------------------------------- the clauses of 2.1 and 2.2
# Each clause of the contracts (the page's "The lab", the lab's exercise): its check, fixed case, honest mistake
# (tests/honest/wrong/<wrong>.py) and the words its failure holds; tests/test_clauses.py holds them to it.

CLAUSES = [
    Clause("2.1-ordering", "The copies start only after the forward's work", "ordering",
           "one step of 6 requests, its copies queued", "2.1-no-wait-for-the-forward",
           "the side stream must wait for the compute stream",
           lab="start only after the work queued on the compute stream before them"),
    Clause("2.1-compute-never-waits", "the compute stream never waits for them", "ordering",
           "one step of 6 requests, its copies queued", "2.1-compute-waits-for-copies",
           "the compute stream never waits for the side stream", lab="the compute stream never waits for the copies"),
    Clause("2.1-coverage", "The event the host waits on covers the copies", "ordering",
           "one step of 6 requests, its copies queued", "2.1-event-recorded-after-block",
           "an event covers only the work queued on the stream it is recorded on",
           also=("cuda-path", "syncs", "engine-order"),
           lab="The event get_output() waits on completes only once the copies have landed"),
    Clause("2.1-once", "waits exactly once per step, in get_output()", "syncs", "1 request",
           "2.1-synchronize-everything", "would also wait for the NEXT step's forward",
           also=("ordering", "engine-order")),
    Clause("2.1-own-copies", "for that step's copies alone", "engine-order",
           "step 0 queued, step 1 queued, then step 0's get_output(), then step 1's",
           "2.1-event-shared-between-steps", "also waited for step 1's copies", lab="that step's copies alone"),
    Clause("2.1-nothing-to-copy", "nor on a step that copies nothing", "nothing-finished",
           "a first step where no request finishes", "2.1-stream-fetched-first", "before asking for the side stream",
           lab="never on a path that does not copy"),
    Clause("2.1-lifetime", "The device tensor the copies read stays alive until they are done", "memory",
           "one step of 8 requests, its output collected", "2.1-raw-output-dropped",
           "keep a reference to the raw pooler output",
           lab="The raw pooler output stays alive until the copy that reads it is done"),
    Clause("2.1-until-the-wait", "once `get_output()` has\n  waited, nothing keeps it", "memory",
           "one step of 8 requests, its output collected", "2.1-released-before-the-wait",
           "released 1 device tensor(s) before its wait",
           lab="nothing keeps it once `get_output()` has waited"),
    Clause("2.2-cause", "name the one that explains the others", "diagnosis",
           "runners' evidence, one simulated step each", "2.2-symptom-not-cause", "it is a consequence"),
    Clause("2.1-cpu-platform", "a CPU platform copies and waits as the baseline does", "cpu-platform",
           "a fixed batch of 3 requests", "2.1-every-platform-async", "check current_platform.is_cuda_alike()",
           lab="On a platform that is not CUDA-like the step copies and waits as the baseline does"),
    # A host buffer that is not pinned makes a non_blocking download a wait (CUDA's rule): the sync check fails too
    Clause("2.1-pinned", "the host buffers are pinned", "memory", "one step of 8 requests",
           "2.1-pageable-host-copies", "allocate pinned buffers", also=("ordering", "syncs"), lab="and they are pinned"),
    Clause("2.1-lazy-once", "The side stream is created once, lazily, and reused", "lazy-stream",
           "a runner built, then 5 steps of 4 requests", "2.1-new-stream-every-step", "create it once",
           lab="None until first needed"),
]
