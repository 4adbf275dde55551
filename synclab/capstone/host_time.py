"""Chapter 6's host time, measured: what one engine step's host time is made of, per configuration.

Taught in chapter 6 (the capstone), "What the step's host time is made of".

A step's host time is split into the parts of the step that spend it (:data:`HOST_PHASES`), by a clock
(:func:`phase_clock`) that wraps the engine's own methods for the length of a run and charges each stretch of
time to the innermost part running: the scheduler's questions (chapter 5's fix), the uploads (chapter 3's),
the model, ALL pooling (chapter 1's), the placeholder repair's scan (chapter 4's), the rest of sampling, the
output copy and its wait (chapter 2's), collecting the output, and the loop itself.

* :func:`host_phases` — per configuration, the host's time per decode step in each part, configurations
  interleaved, on one intra-op thread: the median over the decode steps of every round, and each round's median
  step (the spread). On a CPU the model's part is its compute, which a GPU does on the device: the host's own
  bookkeeping is everything else.
"""

from __future__ import annotations

import functools
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence


from torch import nn

from synclab.capstone.workloads import Workload, ablation_configs, current_fixes, run_engine
from synclab.engine.engine_core import EngineConfig, EngineCore, EngineRunner, PendingOutput
from synclab.engine.input_batch_baseline import InputBatchBaseline
from synclab.engine.scheduler import Scheduler
from synclab.engine.tiny_llm import TinyDecoder

# The parts of a step, in the step's order, and the fix of chapters 1-5 that works on each (None: no fix does).
HOST_PHASES: dict[str, str | None] = {
    "schedule": "list_cache",  # the scheduler asks every image's PlaceholderRange, every step
    "uploads": "pinned_uploads",  # inputs, logprob ids and bad words to the device
    "model": None,  # embed, encoder, forward, logits: on a GPU, kernel launches; on a CPU, the compute too
    "pool": "slice_then_split",  # ALL pooling's split of the hidden states
    "scan": "reverse_scan",  # the placeholder repair's search for the first -1
    "sample": None,  # bad words, greedy sampling, logprobs, placeholders appended
    "copy": "lazy_stream",  # the output copy queued, and before chapter 2's fix the wait for the whole device
    "collect": None,  # the previous step's output read and handed to its requests
    "loop": None,  # the step's own code between those (the input layout included)
}

# Each part's methods: class -> method names. The innermost one running is charged.
_TIMED: dict[str, list[tuple[type, str]]] = {
    "schedule": [(Scheduler, "schedule"), (Scheduler, "update_from_output")],
    "uploads": [(EngineRunner, "upload")],
    "model": [(TinyDecoder, "forward"), (nn.Embedding, "forward"), (TinyDecoder, "compute_logits"),
              (TinyDecoder, "encode_images")],
    "pool": [(EngineRunner, "_pool")],
    "sample": [(EngineRunner, "_sample")],
    "copy": [(EngineRunner, "_copy_to_host")],
    "collect": [(PendingOutput, "get_output"), (EngineCore, "_process")],
}


class PhaseClock:
    """Exclusive host time per part of the step: a stack of the parts running, the innermost charged."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.spent: dict[str, float] = {}
        self.mark = 0.0

    def _charge(self) -> None:
        now = time.perf_counter()
        phase = self.stack[-1] if self.stack else "loop"
        self.spent[phase] = self.spent.get(phase, 0.0) + now - self.mark
        self.mark = now

    def enter(self, phase: str) -> None:
        self._charge()
        self.stack.append(phase)

    def leave(self) -> None:
        self._charge()
        self.stack.pop()

    @contextmanager
    def step(self) -> Iterator[dict[str, float]]:
        """One step: yields the dict its parts' seconds land in, once the step is over."""
        self.stack.clear()
        self.spent = {}
        self.mark = time.perf_counter()
        result: dict[str, float] = {}
        yield result
        self._charge()
        result.update(self.spent)


def _timed(clock: PhaseClock, phase: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        clock.enter(phase)
        try:
            return method(*args, **kwargs)
        finally:
            clock.leave()
    return wrapper


@contextmanager
def phase_clock(components: Any) -> Iterator[PhaseClock]:
    """Wrap the engine's methods (and both sides of the placeholder repair) in one clock for a run; restored after."""
    clock = PhaseClock()
    targets = [(cls, name, phase) for phase, methods in _TIMED.items() for cls, name in methods]
    for cls in {InputBatchBaseline, components.input_batch} - {None}:  # None: chapter 4 not written yet
        targets.append((cls, "update_async_output_token_ids", "scan"))
    saved: list[tuple[type, str, Any]] = []
    try:
        for cls, name, phase in targets:
            saved.append((cls, name, cls.__dict__.get(name)))
            setattr(cls, name, _timed(clock, phase, getattr(cls, name)))
        yield clock
    finally:
        for cls, name, original in reversed(saved):
            if original is None:
                delattr(cls, name)  # it was inherited: the base's method shows through again
            else:
                setattr(cls, name, original)


@dataclass
class HostPhases:
    """One configuration's host time per decode step: median µs per part, and each round's median step total."""

    per_phase_us: dict[str, float]
    round_totals_us: list[float] = field(default_factory=list)  # per round: the median step's total host time

    def parts_of_step_us(self) -> dict[str, float]:
        """The parts scaled to add up to the median step (:func:`synclab.figures.parts_of_step`): what the page draws."""
        from synclab.figures import parts_of_step

        return parts_of_step(self.per_phase_us, self.round_totals_us)[0]

    @property
    def own_us(self) -> float:
        """The host's own bookkeeping per step: the median step less its model part (on a GPU, the device computes
        the model), the parts as the figure draws them."""
        return sum(us for phase, us in self.parts_of_step_us().items() if phase != "model")

    def to_dict(self) -> dict[str, Any]:
        return {"per_phase_us": self.per_phase_us, "round_totals_us": self.round_totals_us}


def host_phases(workload: Workload, configs: Sequence[EngineConfig] | None = None, rounds: int = 3,
                components: Any = None) -> dict[str, HostPhases]:
    """Per configuration: the host's time per decode step in each of :data:`HOST_PHASES`, measured.

    Each round runs every configuration once, the order rotating; the first step (it starts the requests) and the
    last (it only collects) of each run are left out. On one intra-op thread: a CPU's second thread only adds noise.
    """
    from synclab.timing import Progress, measurement_threads

    components = components or current_fixes()
    configs = list(configs or ablation_configs())
    steps: dict[str, list[dict[str, float]]] = {components.label_for(c): [] for c in configs}
    totals: dict[str, list[float]] = {label: [] for label in steps}
    bar = Progress(rounds * len(configs), "host time per part of the step")
    with measurement_threads(), phase_clock(components) as clock:
        for r in range(rounds):
            for config in configs[r % len(configs):] + configs[:r % len(configs)]:
                run: list[dict[str, float]] = []

                @contextmanager
                def timed(engine: EngineCore) -> Iterator[None]:
                    with clock.step() as spent:
                        yield
                    run.append(spent)

                run_engine(workload, config, components, each_step=timed)
                if len(run) < 3:
                    raise ValueError(f"the run took {len(run)} steps: no decode step between its first and last")
                label = components.label_for(config)
                steps[label] += run[1:-1]
                totals[label].append(statistics.median(sum(s.values()) for s in run[1:-1]) * 1e6)
                bar.step(config.label)
    bar.close()
    return {label: HostPhases({phase: statistics.median(s.get(phase, 0.0) for s in rows) * 1e6
                               for phase in HOST_PHASES}, totals[label])
            for label, rows in steps.items()}
