"""Measure time honestly: one protocol behind every timing figure of the book.

Taught in chapter 0 (the primer); every chapter's profiling cells use it.

GPU work is asynchronous: a call returns when its kernels are *queued*, not done.
A shared machine is noisy: another process can take a core for a while. So every
measurement here follows one protocol:

* the first call's result is **checked** before anything is timed (a fast wrong
  answer is not a result), then a few **warm-up** calls run untimed;
* on a CPU, torch runs with **one intra-op thread** for the whole measurement
  (restored after): two threads on two shared cores turn a 100 us call into 8 ms
  whenever the other core is busy;
* a **block** is ``number`` calls timed together, with ``torch.cuda.synchronize()``
  before and after on a GPU (as ``torch.utils.benchmark`` does), so the time includes
  the device's work and not only the queueing; ``number`` is calibrated so that a
  block is long enough for the clock;
* the variants being compared are **interleaved round-robin**: every round times a
  few blocks of each variant, the order rotating, so they share the machine's noise;
* the result is the **median of the per-round medians**, and their spread (every
  per-round median is stored, and figures draw their range).
"""

from __future__ import annotations

import statistics
import sys
import time
import timeit
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch

from synclab.device import has_cuda, synchronize
from synclab.provenance import Provenance
# the run modes (deliberate, book build, smoke), kept where no torch is imported: the grader's processes read them
from synclab.run_modes import deliberate_run, refuse_in_book_build, smoke_run


ROUNDS = 5  # rounds of the round-robin: the statistic is the median of this many per-round medians
BLOCKS_PER_ROUND = 3  # blocks of each variant per round


def run_time(quick: float, deliberate: float) -> float:
    """Seconds of timed calls per variant and point: ``deliberate`` in a storing run, else ``quick``."""
    return deliberate if deliberate_run() else quick


@contextmanager
def measurement_threads() -> Iterator[int]:
    """One intra-op thread on a CPU for the block, restored after; a GPU run keeps torch's setting.

    Yields the thread count the measurement runs with (figures say it).
    """
    if has_cuda():
        yield torch.get_num_threads()
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield 1
    finally:
        torch.set_num_threads(saved)


@dataclass
class Timing:
    """The result of one measurement: per-call times in microseconds."""

    label: str
    median_us: float  # median of the per-round medians
    iqr_us: float  # interquartile range of the per-round medians
    times_us: list[float]  # the per-round medians, in round order
    provenance: Provenance

    def __str__(self) -> str:
        return f"{self.label}: median {self.median_us:.2f} us (IQR {self.iqr_us:.2f} us, {len(self.times_us)} rounds)"

    __repr__ = __str__

    @property
    def low_us(self) -> float:
        return min(self.times_us)

    @property
    def high_us(self) -> float:
        return max(self.times_us)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "median_us": self.median_us, "iqr_us": self.iqr_us, "times_us": self.times_us}


def _assert_same(got: Any, expected: Any, label: str) -> None:
    """Refuse to time a wrong answer: tensors (or nests of them) are compared with assert_close."""
    try:
        torch.testing.assert_close(got, expected, check_device=False)
    except TypeError:  # plain Python values
        if got != expected:
            raise AssertionError(f"{label}: got {got!r}, expected {expected!r}; refusing to time it.") from None
    except AssertionError as exc:
        raise AssertionError(f"{label}: wrong result, refusing to time it.\n{exc}") from None


@contextmanager
def _untraced() -> Iterator[None]:
    """Python's tracing (a debugger, coverage, a grader's watch over the code) off while calls are timed: it slows
    every line they run, and some code more than other code, so it would change the ratio being measured."""
    previous = sys.gettrace()
    sys.settrace(None)
    try:
        yield
    finally:
        sys.settrace(previous)


def _time_block(call: Callable[[], Any], number: int, setup: Callable[[], None] | None) -> float:
    """Seconds per call over ``number`` calls; synchronised before and after, as torch.utils.benchmark does."""
    if setup is not None:
        setup()
    synchronize()
    start = timeit.default_timer()
    for _ in range(number):
        call()
    synchronize()
    return (timeit.default_timer() - start) / number


def _calibrate(call: Callable[[], Any], block_s: float, setup: Callable[[], None] | None) -> int:
    """The smallest power of two of calls whose block lasts ``block_s`` (the calls double as warm-up)."""
    number = 1
    while number < 1 << 20:
        if _time_block(call, number, setup) * number >= block_s:
            return number
        number *= 2
    return number


def _iqr(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


def compare(
    calls: dict[str, Callable[[], Any]],
    *,
    min_run_time: float = 0.2,
    rounds: int = ROUNDS,
    warmup: int = 3,
    expected: dict[str, Any] | None = None,
    check: Callable[[Any], None] | None = None,
    setup: Callable[[], None] | None = None,
    decides_a_check: bool = False,
) -> dict[str, Timing]:
    """Time several zero-argument calls against each other, interleaved round-robin.

    ``expected`` maps a call's name to the result it must return (checked on the first
    call, before any timing); ``check`` is run on every call's first result.
    ``min_run_time`` is the timed seconds per call, spread over ``rounds`` rounds.
    ``setup`` runs before every timed block, outside the timing (e.g. to reset a cache).
    ``decides_a_check``: a check's pass or fail rests on these times, so a smoke run keeps the full protocol.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    refuse_in_book_build("time " + ", ".join(calls))
    blocks_per_round = BLOCKS_PER_ROUND
    if smoke_run() and not decides_a_check:
        rounds, blocks_per_round, warmup, min_run_time = min(rounds, 2), 1, min(warmup, 1), 0.0
    with measurement_threads(), _untraced():
        provenance = Provenance.here()
        for name, call in calls.items():
            result = call()
            synchronize()
            if expected is not None and name in expected:
                _assert_same(result, expected[name], name)
            if check is not None:
                check(result)
        for call in calls.values():
            for _ in range(warmup):
                call()
        synchronize()
        block_s = min_run_time / (rounds * blocks_per_round)
        numbers = {name: _calibrate(call, block_s, setup) for name, call in calls.items()}
        per_round: dict[str, list[float]] = {name: [] for name in calls}
        names = list(calls)
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]  # rotate: nobody always goes first
            blocks: dict[str, list[float]] = {name: [] for name in names}
            for _ in range(blocks_per_round):
                for name in order:
                    blocks[name].append(_time_block(calls[name], numbers[name], setup))
            for name in names:
                per_round[name].append(statistics.median(blocks[name]) * 1e6)
    return {name: Timing(label=name, median_us=statistics.median(times), iqr_us=_iqr(times), times_us=times,
                         provenance=provenance)
            for name, times in per_round.items()}


def benchmark(
    fn: Callable[..., Any],
    *args: Any,
    label: str | None = None,
    expected: Any = None,
    check: Callable[[Any], None] | None = None,
    warmup: int = 3,
    min_run_time: float = 0.2,
    setup: Callable[[], None] | None = None,
    rounds: int = ROUNDS,
    **kwargs: Any,
) -> Timing:
    """Time ``fn(*args, **kwargs)`` alone with the protocol of :func:`compare`; per-call microseconds.

    To compare versions, use :func:`compare` (or :func:`sweep`): measured one after the
    other, two versions see different noise.
    """
    label = label or getattr(fn, "__name__", "fn")
    timings = compare({label: lambda: fn(*args, **kwargs)}, min_run_time=min_run_time, rounds=rounds,
                      warmup=warmup, expected={label: expected} if expected is not None else None,
                      check=check, setup=setup)
    return timings[label]


# ----------------------------------------------------------------------------- sweeps


class Progress:
    """A progress bar: an HTML <progress> in a notebook, a ``\\r`` line in a terminal."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label, self.done = total, label, 0
        self.started = time.perf_counter()
        self.handle = None
        try:
            from IPython import get_ipython
            from IPython.display import display

            if get_ipython() is not None and hasattr(get_ipython(), "kernel"):
                self.handle = display(self._bundle(), raw=True, display_id=True)
        except ImportError:
            pass

    def _bundle(self, final: bool = False) -> dict[str, str]:
        text = f"{self.label}: {self.done}/{self.total}" + (" done" if final else "")
        if final:
            return {"text/plain": text}
        html = f"<progress value='{self.done}' max='{self.total}'></progress> {text}"
        return {"text/plain": text, "text/html": html}

    def step(self, what: str) -> None:
        self.done += 1
        if self.handle is not None:
            self.handle.update(self._bundle(), raw=True)
        else:
            elapsed = time.perf_counter() - self.started
            print(f"\r{self.label}: {self.done}/{self.total} ({what}) {elapsed:.0f}s", end="", file=sys.stderr)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.update(self._bundle(final=True), raw=True)  # no timing: stable notebook output
        else:
            print(file=sys.stderr)


@dataclass
class Sweep:
    """Timings of several variants over the values of one parameter (the first variant is the baseline)."""

    parameter: str
    values: list[Any]
    timings: dict[str, list[Timing]] = field(default_factory=dict)  # variant -> one Timing per value
    provenance: Provenance = field(default_factory=Provenance.here)
    claim: dict[str, Any] | None = None  # the claim it was checked against, and the verdict (synclab.claims)

    @property
    def variants(self) -> list[str]:
        return list(self.timings)

    def medians_us(self, variant: str) -> list[float]:
        return [t.median_us for t in self.timings[variant]]

    def ratio(self, slow: str, fast: str) -> list[float]:
        """Per value: how many times faster ``fast`` is than ``slow``."""
        return [s / f for s, f in zip(self.medians_us(slow), self.medians_us(fast))]

    def to_dict(self) -> dict[str, Any]:
        data = {
            "parameter": self.parameter,
            "values": self.values,
            "variants": self.variants,  # their order: notebooks are stored with sorted keys, and 0 is the baseline
            "timings": {k: [t.to_dict() for t in v] for k, v in self.timings.items()},
            "provenance": self.provenance.to_dict(),
        }
        if self.claim is not None:
            data["claim"] = self.claim
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Sweep":
        prov = Provenance.from_dict(data["provenance"])
        order = data.get("variants", list(data["timings"]))
        timings = {
            k: [Timing(t["label"], t["median_us"], t["iqr_us"], t["times_us"], prov) for t in data["timings"][k]]
            for k in order
        }
        return cls(data["parameter"], data["values"], timings, prov, data.get("claim"))

    def table(self) -> str:
        """Median per variant and value: a column per variant, or, past three variants, a row per variant (the
        table then stays narrow enough for a page)."""
        names = list(self.timings)
        if len(names) > 3:
            width = max(len(n) for n in names) + 2
            rows = [f"median time, by {self.parameter}:", f"{'':<{width}}" + "".join(f"{v!s:>14}" for v in self.values)]
            rows += [f"{n:<{width}}" + "".join(f"{t.median_us:>11.1f} us" for t in self.timings[n]) for n in names]
            return "\n".join(rows)
        head = f"{self.parameter:>12} " + " ".join(f"{n:>18}" for n in names)
        rows = [head]
        for i, v in enumerate(self.values):
            rows.append(f"{v!s:>12} " + " ".join(f"{self.timings[n][i].median_us:>15.1f} us" for n in names))
        return "\n".join(rows)


def sweep(
    variants: dict[str, Callable[[Any], Callable[[], Any]]],
    parameter: str,
    values: Sequence[Any] | Iterable[Any],
    *,
    min_run_time: float = 0.1,
    rounds: int = ROUNDS,
    progress: bool = True,
    reference: str | None = None,
) -> Sweep:
    """Time every variant at every value of ``parameter``, the variants interleaved at each value.

    ``variants`` maps a name to a *factory*: ``factory(value)`` builds the inputs and
    returns a zero-argument callable to time. Building inputs stays outside the timing.
    With ``reference`` (a variant's name), every variant's result at each value must
    equal that variant's before anything is timed.
    """
    values = list(values)
    if reference is not None and reference not in variants:
        raise ValueError(f"reference {reference!r} is not one of the variants {list(variants)}")
    with measurement_threads():
        result = Sweep(parameter=parameter, values=values, timings={name: [] for name in variants})
    bar = Progress(len(values), f"sweeping {parameter}") if progress else None
    for value in values:
        labels = {name: f"{name} {parameter}={value}" for name in variants}
        calls = {labels[name]: factory(value) for name, factory in variants.items()}
        expected = None
        if reference is not None:
            truth = calls[labels[reference]]()
            expected = {label: truth for name, label in labels.items() if name != reference}
        timings = compare(calls, min_run_time=min_run_time, rounds=rounds, expected=expected)
        for name in variants:
            result.timings[name].append(timings[labels[name]])
        if bar:
            bar.step(f"{parameter}={value}")
    if bar:
        bar.close()
    return result


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
