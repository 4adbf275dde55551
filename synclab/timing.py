"""Measure time honestly: ``benchmark()`` for one callable, ``sweep()`` over a parameter.

Taught in chapter 0 (the primer); every chapter's profiling cells use it.

GPU work is asynchronous: a call returns when its kernels are *queued*, not done.
So :func:`benchmark` synchronises around the timed region (``torch.utils.benchmark``
does this for CUDA), warms up first (allocator, caches, lazy initialisation), checks
the result is correct before timing it, and reports the median and the spread of
many runs rather than one number.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.utils.benchmark as torch_benchmark

from synclab.device import synchronize
from synclab.provenance import Provenance


@dataclass
class Timing:
    """The result of one :func:`benchmark`: per-call times in microseconds."""

    label: str
    median_us: float
    iqr_us: float  # interquartile range: the spread of the middle half of the runs
    times_us: list[float]  # per-call time of each measured block
    provenance: Provenance

    def __str__(self) -> str:
        return f"{self.label}: median {self.median_us:.2f} us (IQR {self.iqr_us:.2f} us, {len(self.times_us)} blocks)"

    __repr__ = __str__

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


def benchmark(
    fn: Callable[..., Any],
    *args: Any,
    label: str | None = None,
    expected: Any = None,
    check: Callable[[Any], None] | None = None,
    warmup: int = 3,
    min_run_time: float = 0.2,
    setup: Callable[[], None] | None = None,
    **kwargs: Any,
) -> Timing:
    """Time ``fn(*args, **kwargs)``: median and spread of per-call time, in microseconds.

    * ``expected`` / ``check``: the first call's result is verified before any timing
      (a fast wrong answer is not a result).
    * ``warmup`` calls run first and are not timed.
    * ``setup`` runs once before each timed block, outside the timing (e.g. to reset a cache).
    * On a GPU, ``torch.utils.benchmark`` synchronises before and after each block,
      so the time includes the device work, not just the queueing.
    """
    label = label or getattr(fn, "__name__", "fn")
    result = fn(*args, **kwargs)
    synchronize()
    if expected is not None:
        _assert_same(result, expected, label)
    if check is not None:
        check(result)
    for _ in range(warmup):
        fn(*args, **kwargs)
    synchronize()

    timer = torch_benchmark.Timer(
        stmt="call()",
        setup="setup()",
        globals={"call": lambda: fn(*args, **kwargs), "setup": setup or (lambda: None)},
        label=label,
        num_threads=torch.get_num_threads(),
    )
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    times_us = [t * 1e6 for t in measurement.times]
    return Timing(
        label=label,
        median_us=measurement.median * 1e6,
        iqr_us=measurement.iqr * 1e6,
        times_us=times_us,
        provenance=Provenance.here(),
    )


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
    """Timings of several variants over the values of one parameter."""

    parameter: str
    values: list[Any]
    timings: dict[str, list[Timing]] = field(default_factory=dict)  # variant -> one Timing per value
    provenance: Provenance = field(default_factory=Provenance.here)

    def medians_us(self, variant: str) -> list[float]:
        return [t.median_us for t in self.timings[variant]]

    def ratio(self, slow: str, fast: str) -> list[float]:
        """Per value: how many times faster ``fast`` is than ``slow``."""
        return [s / f for s, f in zip(self.medians_us(slow), self.medians_us(fast))]

    def to_dict(self) -> dict[str, Any]:
        return {
            "parameter": self.parameter,
            "values": self.values,
            "timings": {k: [t.to_dict() for t in v] for k, v in self.timings.items()},
            "provenance": self.provenance.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Sweep":
        prov = Provenance.from_dict(data["provenance"])
        timings = {
            k: [Timing(t["label"], t["median_us"], t["iqr_us"], t["times_us"], prov) for t in v]
            for k, v in data["timings"].items()
        }
        return cls(data["parameter"], data["values"], timings, prov)

    def table(self) -> str:
        names = list(self.timings)
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
    progress: bool = True,
    reference: str | None = None,
) -> Sweep:
    """Benchmark every variant at every value of ``parameter``.

    ``variants`` maps a name to a *factory*: ``factory(value)`` builds the inputs and
    returns a zero-argument callable to time. Building inputs stays outside the timing.
    With ``reference`` (a variant's name), every variant's result at each value must
    equal that variant's before it is timed.
    """
    values = list(values)
    if reference is not None and reference not in variants:
        raise ValueError(f"reference {reference!r} is not one of the variants {list(variants)}")
    expected = {v: variants[reference](v)() for v in values} if reference is not None else {}
    result = Sweep(parameter=parameter, values=values)
    bar = Progress(len(values) * len(variants), f"sweeping {parameter}") if progress else None
    for name, factory in variants.items():
        result.timings[name] = []
        for value in values:
            call = factory(value)
            result.timings[name].append(benchmark(call, label=f"{name} {parameter}={value}", min_run_time=min_run_time,
                                                  expected=expected.get(value)))
            if bar:
                bar.step(f"{name}, {parameter}={value}")
    if bar:
        bar.close()
    return result


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
