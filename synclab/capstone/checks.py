"""Chapter 6's checks: the sync hunt (6.1) and the ablation's counts (6.2).

Taught in chapter 6 (the capstone). Every check counts; none times anything:

* a step's syncs, split into the **planned wait** (the placeholder repair or the output
  collection waiting on the previous step's copy event, while this step is already
  queued) and **stray syncs** (everything else: each one drains the device's queue);
* the host's work per decode step: torch calls made on the host plus elements of the
  output histories touched (chapter 4's :class:`~synclab.reverse_scan.CountingList`),
  which must stay flat as outputs grow and as requests carry more images.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from synclab.capstone.fixes import load_fixes
from synclab.capstone.planted import PlantedRunner
from synclab.capstone.workloads import (RequestSpec, Workload, comparable, first_difference, framed_image, random_mix,
                                        run_engine)
from synclab.checks import Check, CheckReport, expect, run_checks
from synclab.dispatch import count_torch_calls
from synclab.engine.engine_core import EngineConfig, EngineCore, EngineRunner, SamplingParams
from synclab.engine.scheduler import SchedulerConfig
from synclab.reverse_scan import CountingList
from synclab.syncs import SyncEvent, count_syncs

RunnerClass = type[EngineRunner]
def is_planned(event: SyncEvent) -> bool:
    """The one wait a step may make: the engine marks it with ``gpu_sync_allowed()``, as vLLM does since #44800.

    The engine wraps its wait on the previous step's output-copy event (in the placeholder
    repair, or when the output is collected) in an allowed region; every other sync is stray.
    """
    return event.allowed


@dataclass
class StepSyncs:
    """What ``count_syncs`` saw in each step of a run."""

    stray: list[list[SyncEvent]]  # per step
    planned: list[int]  # per step

    @property
    def stray_per_step(self) -> float:
        return sum(map(len, self.stray)) / max(len(self.stray), 1)

    @property
    def syncs_per_step(self) -> float:
        return (sum(map(len, self.stray)) + sum(self.planned)) / max(len(self.stray), 1)

    def first_stray(self) -> SyncEvent | None:
        return next((e for step in self.stray for e in step), None)


def step_syncs(workload: Workload, config: EngineConfig, runner_cls: RunnerClass = EngineRunner,
               components: Any = None) -> tuple[StepSyncs, dict]:
    """Run ``workload`` to the end, counting each step's syncs; returns them and the results."""
    stray: list[list[SyncEvent]] = []
    planned: list[int] = []

    @contextmanager
    def counted(engine: EngineCore) -> Iterator[None]:
        with count_syncs() as report:
            yield
        stray.append([e for e in report.events if not is_planned(e)])
        planned.append(sum(map(is_planned, report.events)))

    results = run_engine(workload, config, components or load_fixes(), runner_cls, each_step=counted)
    return StepSyncs(stray, planned), results


def decode_workload(output_len: int, images: int, num_requests: int = 4, embeddings: int = 0,
                    hunt_features: bool = False) -> Workload:
    """Requests resumed with ``output_len`` tokens already out and ``images`` images each, decoding 6 tokens.

    Every other one asks for logprobs; ``embeddings`` embedding requests (12-token prompts) join them.
    ``hunt_features`` gives each a logit bias and a stop token banned by ``min_tokens`` for the whole
    run (6.1's features, exercised in every step without ending a request early).
    """
    specs = [RequestSpec(f"embed-{i}", tuple(range(1, 13))) for i in range(embeddings)]
    extras = {"logit_bias": ((4, 0.5),), "stop_token_ids": (9,), "min_tokens": 1_000} if hunt_features else {}
    for i in range(num_requests):
        prompt: list[int] = [1, 2]
        ims = []
        for j in range(images):
            ims.append(framed_image(f"img-{i}-{j}", len(prompt), 6))
            prompt += [0] * 6 + [3]
        sampling = SamplingParams(max_tokens=6, bad_words=((5, 7),), logprob_token_ids=(1, 2) if i % 2 else (),
                                  **extras)
        specs.append(RequestSpec(f"gen-{i}", tuple(prompt), sampling,
                                 tuple(ims), tuple((i + k) % 50 + 8 for k in range(output_len))))
    return Workload(tuple(specs), SchedulerConfig(max_num_batched_tokens=2048, max_num_encoder_input_tokens=4096,
                                                  encoder_cache_size=4096))


@dataclass
class HostWork:
    """One decode step's host work: torch calls plus history elements touched, and what dominated."""

    total: int
    torch_calls: dict[str, int]
    history: dict[str, int]  # elements touched, by list operation

    def largest(self) -> str:
        parts = [(n, f"history: {op}") for op, n in self.history.items()]
        parts += [(n, f"torch: {name}") for name, n in self.torch_calls.items()]
        return ", ".join(f"{what} x{n}" for n, what in sorted(parts, reverse=True)[:3])


def host_work_in_decode_step(runner_cls: RunnerClass, config: EngineConfig, output_len: int, images: int,
                             components: Any = None, hunt_features: bool = False) -> HostWork:
    """:class:`HostWork` of the last decode step of :func:`decode_workload`."""
    per_step: list[HostWork] = []

    class Counted(runner_cls):  # type: ignore[misc, valid-type]
        history_type = CountingList

    @contextmanager
    def counted(engine: EngineCore) -> Iterator[None]:
        CountingList.touched = 0
        CountingList.by_op.clear()
        with count_torch_calls() as calls:
            yield
        per_step.append(HostWork(calls.count + CountingList.touched, dict(calls.by_name), dict(CountingList.by_op)))

    run_engine(decode_workload(output_len, images, hunt_features=hunt_features), config,
               components or load_fixes(), Counted, each_step=counted)
    return per_step[-2]  # the last step that queued work (the final one only collects)


def host_work_per_decode_step(runner_cls: RunnerClass, config: EngineConfig, output_len: int, images: int,
                              components: Any = None, hunt_features: bool = False) -> int:
    """Host torch calls plus history elements touched, in the last decode step of :func:`decode_workload`."""
    return host_work_in_decode_step(runner_cls, config, output_len, images, components, hunt_features).total


FLAT_BOUND = 1.5  # host work may grow by at most this factor while outputs grow 16x or images 8x


# ----------------------------------------------------------------------------- 6.1 the sync hunt

HUNT_CASES = 3


def _hunt_mixes(rng: random.Random) -> list[Workload]:
    return [random_mix(rng, num_requests=rng.randint(3, 7), hunt_features=True) for _ in range(HUNT_CASES)]


def _check_same_outputs(factory: Callable[[], RunnerClass], rng: random.Random) -> None:
    runner_cls = factory()
    fixes = load_fixes()
    for i, mix in enumerate(_hunt_mixes(rng)):
        want = comparable(run_engine(mix, EngineConfig(), fixes, PlantedRunner))
        got = comparable(run_engine(mix, EngineConfig(), fixes, runner_cls))
        diff = first_difference(got, want)
        spec = next((s for s in mix.requests if diff and diff.startswith(f"{s.request_id}:")), None)
        asked = f"; that request asked for {spec.sampling}" if spec is not None and spec.sampling else ""
        expect(diff is None, "your runner's outputs differ from the planted runner's (which are right)",
               got=f"{diff}{asked}", case=f"random mix {i + 1} of {HUNT_CASES}",
               hint="keep every feature: logit bias, min_tokens (stop tokens banned until then) and stop tokens; "
                    "a stop takes effect when the step's output reaches the host, as before")


def _check_no_stray_syncs(factory: Callable[[], RunnerClass], rng: random.Random) -> None:
    runner_cls = factory()
    for i, mix in enumerate(_hunt_mixes(rng)):
        syncs, _ = step_syncs(mix, EngineConfig(), runner_cls)
        first = syncs.first_stray()
        expect(first is None, f"{sum(map(len, syncs.stray))} stray sync(s) in {len(syncs.stray)} steps",
               expected="0 per step", got=str(first), case=f"random mix {i + 1} of {HUNT_CASES}",
               hint="the line above is the first one; count_syncs lists them all with their lines")
        worst = max(syncs.planned, default=0)
        expect(worst <= 1, "a step waited more than once on the output copy", expected="at most 1 planned wait",
               got=f"{worst} in one step", case=f"random mix {i + 1}")


def _check_flat_in(parameter: str) -> Callable[[Callable[[], RunnerClass], random.Random], None]:
    def check(factory: Callable[[], RunnerClass], rng: random.Random) -> None:
        runner_cls = factory()
        small, large = ((16, 256), (2, 2)) if parameter == "output length" else ((16, 16), (2, 16))
        work = [host_work_in_decode_step(runner_cls, EngineConfig(), n, m, hunt_features=True)
                for n, m in zip(small, large)]
        expect(work[1].total <= FLAT_BOUND * work[0].total, f"host work per decode step grows with {parameter}",
               expected=f"at most {FLAT_BOUND}x",
               got=f"{work[0].total} -> {work[1].total} (torch calls + history elements); "
                   f"the most at {parameter} {large[1] if parameter == 'images' else small[1]}: {work[1].largest()}",
               hint="look for code of yours that walks a request's whole output history (or every image) each step: "
                    "keep a count instead; the switches' fixes (chapters 4 and 5) already keep theirs flat")
    return check


HUNT_CHECKS = [
    Check("6.1", "outputs identical to the planted runner's", _check_same_outputs),
    Check("6.1", "0 stray syncs per step, at most 1 planned wait", _check_no_stray_syncs),
    Check("6.1", "host work per step flat in output length", _check_flat_in("output length")),
    Check("6.1", "host work per step flat in images per request", _check_flat_in("images")),
]


def check_sync_hunt(clean_runner: Callable[[], RunnerClass], seed: int | None = None) -> CheckReport:
    """Exercise 6.1: ``clean_runner()`` returns ``PlantedRunner``'s subclass without stray syncs."""
    return run_checks("Exercise 6.1 (the sync hunt)", HUNT_CHECKS, clean_runner, seed=seed)



# ----------------------------------------------------------------------------- 6.2 the ablation's counts

AblationRow = Callable[[EngineConfig, Workload], dict[str, float]]
ROW_KEYS = ("steps", "tokens", "stray_per_step", "planned_per_step")


def ablation_row_reference(config: EngineConfig, workload: Workload) -> dict[str, float]:
    """The lab's own answer to Exercise 6.2: what the checks compare with, and what the page draws until 6.2 passes."""
    syncs, results = step_syncs(workload, config)
    return {"steps": len(syncs.stray), "tokens": sum(len(r.token_ids) for r in results.values()),
            "stray_per_step": syncs.stray_per_step, "planned_per_step": sum(syncs.planned) / len(syncs.planned)}


def _check_row(fn: AblationRow, rng: random.Random) -> None:
    from synclab.capstone.profiling import ablation_workload

    workload = ablation_workload(16)
    combos = list(EngineConfig.all_combinations())
    for config in [EngineConfig.baseline(), EngineConfig(), *rng.sample(combos, 2)]:
        want = ablation_row_reference(config, workload)
        got = fn(config, workload)
        expect(isinstance(got, dict) and set(ROW_KEYS) <= set(got), "the row must be a dict with every key",
               expected=list(ROW_KEYS), got=sorted(got) if isinstance(got, dict) else type(got).__name__)
        for key in ROW_KEYS:
            expect(abs(got[key] - want[key]) < 1e-9, f"{key} is not what count_syncs counts", expected=want[key],
                   got=got[key], case=config.label,
                   hint="one count_syncs block per step; a planned wait is what synclab.capstone.is_planned says")


ABLATION_CHECKS = [Check("6.2", "counts per configuration", _check_row, timeout_s=60)]


def check_ablation_row(fn: AblationRow, seed: int | None = None) -> CheckReport:
    """Exercise 6.2: ``fn(config, workload)`` counts one configuration's run."""
    return run_checks("Exercise 6.2 (the ablation's counts)", ABLATION_CHECKS, fn, seed=seed, limit_s=90)
