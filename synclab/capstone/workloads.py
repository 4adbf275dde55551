"""Chapter 6's workloads: request mixes, the chapters' fixes, running the engine, and what a run counts.

Taught in chapter 6 (the capstone).

* request mixes (:class:`RequestSpec`, :func:`random_mix`, :func:`decode_workload`,
  :func:`ablation_workload`): plain data, so one mix can be built for any
  :class:`~synclab.engine.engine_core.EngineConfig`, each config with its own
  ``PlaceholderRange`` class and fresh request objects;
* :func:`load_fixes` — the code each fix runs, taken from the chapters' notebooks: your labs by
  default (an exercise not written yet is named, and the code before its PR runs instead),
  ``load_fixes("solutions")`` the book's; :func:`book_fixes` — the book's fixes as the package keeps
  them (:mod:`synclab.capstone.chapter_fixes`), for chapter 6's checks (a learner's install has no solutions);
* :func:`run_engine` — the engine over a mix;
* what a run counts: each step's syncs, split into the **planned wait** (marked with
  ``gpu_sync_allowed()``) and **stray syncs** (:func:`step_syncs`), and the host's work per decode
  step (:func:`host_work_in_decode_step`: torch calls plus history elements touched), which must stay
  flat as outputs grow and as requests carry more images.
"""


from __future__ import annotations

import os
import random
import re
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them
from synclab.capstone.chapter_fixes import BOOK_FIXES
from synclab.device import has_cuda, runs_on_device_process
from synclab.dispatch import CountingList, count_torch_calls
from synclab.engine.engine_core import (PATTERNS, Components, EngineConfig, EngineCore, EngineRequest, EngineRunner,
                                        ImageInput, RequestResult, SamplingParams, make_request)
from synclab.engine.mm_inputs import PlaceholderRangeBaseline
from synclab.engine.scheduler import SchedulerConfig
from synclab.engine.tiny_llm import CPU_MODEL, ModelConfig
from synclab.lab.exercises import EXERCISES
from synclab.lab.notebook_code import ROOT, load_function, read_notebook
from synclab.sim import cuda as sim_cuda
from synclab.sim.pinning import simulated_pinning
from synclab.syncs import SyncEvent, SyncKind, count_syncs

RunnerClass = type[EngineRunner]


@dataclass(frozen=True)
class RequestSpec:
    request_id: str
    prompt_token_ids: tuple[int, ...]
    sampling: SamplingParams | None = None  # None: an embedding request
    images: tuple[ImageInput, ...] = ()
    prior_output_token_ids: tuple[int, ...] = ()
    computed_tokens: int = 0  # resumed on a sliding-window model: positions whose keys this run does not compute


@dataclass(frozen=True)
class Workload:
    requests: tuple[RequestSpec, ...]
    scheduler: SchedulerConfig = field(default_factory=lambda: SchedulerConfig(max_num_batched_tokens=96))
    model: ModelConfig = CPU_MODEL


def framed_image(identifier: str, offset: int, length: int) -> ImageInput:
    """An image whose first and last placeholder positions are start/end tokens (no embedding)."""
    return ImageInput(identifier, offset, length, "F" + "T" * (length - 2) + "F")


def random_mix(rng: random.Random, num_requests: int = 6, model: ModelConfig = CPU_MODEL,
               hunt_features: bool = False, max_tokens: int = 10) -> Workload:
    """Generate and embedding requests, some with images (shared or not), logprobs and bad words.

    ``hunt_features`` adds the sampling features of chapter 6's sync hunt (logit bias, stop tokens, min_tokens).
    """
    vocab = model.vocab_size
    # The same image (same identifier) always has the same placeholders, as a content hash guarantees.
    shared = [(f"img-shared-{k}", rng.randint(3, 10), rng.random() < 0.5) for k in range(2)]
    specs = []
    for i in range(num_requests):
        images: list[ImageInput] = []
        prompt: list[int] = [rng.randrange(vocab) for _ in range(rng.randint(1, 6))]
        for j in range(rng.choice((0, 0, 1, 2, 3))):
            name, length, framed = (rng.choice(shared) if rng.random() < 0.4
                                    else (f"img-{i}-{j}", rng.randint(3, 10), rng.random() < 0.5))
            if framed:
                images.append(framed_image(name, len(prompt), length))
            else:
                images.append(ImageInput(name, len(prompt), length))
            prompt += [0] * length + [rng.randrange(vocab) for _ in range(rng.randint(0, 4))]
        if i > 0 and rng.random() < 0.25:
            specs.append(RequestSpec(f"embed-{i}", tuple(prompt), None, tuple(images)))
            continue
        prior = tuple(rng.randrange(vocab) for _ in range(rng.choice((0, 0, rng.randint(1, 40)))))
        sampling = SamplingParams(
            max_tokens=rng.randint(1, max_tokens),
            logprob_token_ids=tuple(rng.sample(range(vocab), rng.randint(1, 4))) if rng.random() < 0.4 else (),
            bad_words=tuple(tuple(rng.randrange(vocab) for _ in range(rng.randint(1, 3)))
                            for _ in range(rng.randint(1, 4))) if rng.random() < 0.5 else (),
            **(_hunt_params(rng, vocab) if hunt_features else {}))
        specs.append(RequestSpec(f"gen-{i}", tuple(prompt), sampling, tuple(images), prior))
    budget = rng.choice((16, 48, 96, 256))
    return Workload(tuple(specs), SchedulerConfig(max_num_batched_tokens=budget, max_num_encoder_input_tokens=64,
                                                  encoder_cache_size=128), model)


def min_tokens_mix(model: ModelConfig = CPU_MODEL, with_bias: bool = True, other_stops: bool = False) -> Workload:
    """The stop rule's boundary, fixed (6.1's checks): every token but one is a stop token, so each request samples
    that one token until it has generated ``min_tokens`` (stops banned) and then stops at once; one request resumed
    with output already out (only this run's tokens count), one with ``min_tokens`` 0. An off-by-one in the count
    shifts where each stops. Beside them a free request with a fractional logit bias on a token whose logprob it asks:
    a bias that loses its fraction (uploaded as integers) shifts that logprob. An embedding request arrives first, so
    the requests' order is not the sampled output's: a stop paired by arrival lands on another request; and the
    request that stops first (min_tokens 0) arrives before the others, so that once it has left the batch a stop
    paired by arrival among the generating requests alone lands on another too (a learner's answer passed without).
    ``with_bias=False`` leaves the biased request out: a ban applied only beside a bias (inside an ``if`` on the
    bias's lists) shows there on every seed (a learner's answer passed the mix with it, and most random draws).
    ``other_stops`` keeps the request ids and gives each request another token to sample (its stop tokens all the
    others), and the biased request another biased token: stop tokens or bias tensors kept by request id from an
    earlier run, on the class or in the module, stop a request early or bias the wrong token on every seed (random
    mixes reuse ids too, but their parameters may happen to agree; a learner's bias cached by the batch's ids passed
    6 runs of 11)."""
    vocab = model.vocab_size
    shift = 10 if other_stops else 0  # the kept tokens 11, 5, 7 become 21, 15, 17: none a token the mix asks about

    def stops_but(kept: int) -> tuple[int, ...]:
        return tuple(t for t in range(vocab) if t != kept + shift)

    specs = (RequestSpec("embed-first", (5, 6, 7), None),  # pooled, never sampled: the output's rows start after it
             # its logprob asked of a stop token min_tokens bans: a ban by a large finite number shows on every seed
             RequestSpec("gen-min0", (8, 9), SamplingParams(max_tokens=8, stop_token_ids=stops_but(11))),
             RequestSpec("gen-min3", (1, 2, 3), SamplingParams(max_tokens=8, stop_token_ids=stops_but(5),
                                                               min_tokens=3, logprob_token_ids=(6,))),
             RequestSpec("gen-resumed-min2", (4, 6), SamplingParams(max_tokens=8, stop_token_ids=stops_but(7),
                                                                    min_tokens=2), (), tuple(range(10, 20))),
             # a bias with a fraction, its token's logprob asked: a bias uploaded as integers shows on every seed
             RequestSpec("gen-free", (2, 4), SamplingParams(max_tokens=5, logprob_token_ids=(3 + shift,),
                                                            logit_bias=((3 + shift, 1.75),))))
    if not with_bias:
        specs = tuple(spec for spec in specs if spec.request_id != "gen-free")
    return Workload(specs, SchedulerConfig(max_num_batched_tokens=64, max_num_encoder_input_tokens=64,
                                           encoder_cache_size=128), model)


def _hunt_params(rng: random.Random, vocab: int) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if rng.random() < 0.6:
        # a bias that forces or bans a token; a fractional one is the fixed case's (min_tokens_mix), which reaches it
        # on every seed
        # distinct tokens, as vLLM's logit_bias is a dict: two biases of one token would leave which one wins to the
        # device (an index_put_ with duplicate indices)
        params["logit_bias"] = tuple((token, rng.choice((-30.0, 30.0)))
                                     for token in rng.sample(range(vocab), rng.randint(1, 3)))
    if rng.random() < 0.7:
        params["stop_token_ids"] = tuple(rng.sample(range(vocab), vocab // 6))  # a stop is likely within a few tokens
        params["min_tokens"] = rng.choice((0, 0, 2, 4))
    return params


def build_requests(workload: Workload, config: EngineConfig, components: Components) -> list[EngineRequest]:
    config = components.effective(config)
    range_cls = components.placeholder_range if config.list_cache else PlaceholderRangeBaseline
    if any(s.computed_tokens for s in workload.requests) and not workload.model.sliding_window:
        raise ValueError("a request resumed with computed tokens needs a sliding-window model (ModelConfig."
                         "sliding_window): otherwise its attention would read cache rows this run never wrote")
    return [make_request(s.request_id, list(s.prompt_token_ids), range_cls, s.sampling, s.images,
                         list(s.prior_output_token_ids), s.computed_tokens) for s in workload.requests]


def engine_for(workload: Workload, config: EngineConfig, components: Components,
               runner_cls: type[EngineRunner] = EngineRunner) -> EngineCore:
    requests = build_requests(workload, config, components)
    if runner_cls.history_type is not list:  # a counted run (counting_histories): the earlier output is history too
        for request in requests:
            request.prior_output_token_ids = runner_cls.history_type(request.prior_output_token_ids)
    return EngineCore(config, components, requests, workload.model, workload.scheduler, runner_cls)


@contextmanager
def device_context() -> Iterator[None]:
    """Where the engine runs: the real device, or on a CPU a simulated GPU machine.

    The simulated one has streams (so the async path runs) and pinned memory, as a GPU machine has (vLLM's
    ``PIN_MEMORY``): the engine's uploads then take the same steps, and make the same torch calls, on both.
    """
    if has_cuda() or runs_on_device_process():  # a real GPU, or the device process (its machine set up already)
        yield
        return
    with sim_cuda.simulated_cuda(), simulated_pinning(True):
        yield


def run_engine(workload: Workload, config: EngineConfig, components: Components,
               runner_cls: type[EngineRunner] = EngineRunner, max_steps: int = 2_000,
               each_step: Callable[[EngineCore], ContextManager[Any]] | None = None
               ) -> dict[str, RequestResult]:
    """Run every request of ``workload`` to the end; ``each_step(engine)`` may wrap each step (to count it).

    When the run raises with fixes of the reader's in it, :class:`FixBrokeTheEngine` names the exercise whose fix
    broke it (each of the reader's fixes is swapped for the book's until the run completes), not the engine's line.
    """
    try:
        return _run(workload, config, components, runner_cls, max_steps, each_step)
    except Exception as exc:  # noqa: BLE001 - re-raised, or named and re-raised
        culprit = _culprit(workload, config, components, runner_cls, max_steps)
        if culprit is None:
            raise
        task, name = culprit
        raise FixBrokeTheEngine(
            f"your Exercise {task} ({name}) breaks the engine's run: {type(exc).__name__}: {exc}. With the book's "
            f"{task} in its place the run completes. Run chapter {task.split('.')[0]}'s check cells: they say what "
            f"your {name} gets wrong") from exc


class FixBrokeTheEngine(RuntimeError):
    """A fix loaded from the reader's chapters made the engine's run raise; the message names its exercise."""


def _run(workload: Workload, config: EngineConfig, components: Components, runner_cls: type[EngineRunner],
         max_steps: int, each_step: Callable[[EngineCore], ContextManager[Any]] | None) -> dict[str, RequestResult]:
    with device_context():
        engine = engine_for(workload, config, components, runner_cls)
        while engine.has_work:
            if engine.steps >= max_steps:
                raise RuntimeError(f"the engine did not finish in {max_steps} steps")
            with each_step(engine) if each_step else nullcontext():
                engine.step()
        return engine.results


def _culprit(workload: Workload, config: EngineConfig, components: Components, runner_cls: type[EngineRunner],
             max_steps: int) -> tuple[str, str] | None:
    """The (exercise, name) of the reader's fix whose swap for the book's lets the run complete; None if none does."""
    for field_name, _, name, task, pattern, _ in FIXES:
        mine = getattr(components, field_name)
        if mine is None or mine is BOOK_FIXES[field_name] or pattern in components.unfinished:
            continue
        try:
            _run(workload, config, replace(components, **{field_name: BOOK_FIXES[field_name]}), runner_cls,
                 max_steps, None)
        except Exception:  # noqa: BLE001 - not this one
            continue
        return task.split(" and ")[-1], name
    return None


def comparable(results: dict[str, RequestResult]) -> dict[str, Any]:
    """Results as plain values: tokens exactly, logprobs and embeddings rounded (what "identical" compares)."""
    out = {}
    for req_id, r in results.items():
        embedding = None if r.embedding is None else [round(v, 4) for v in r.embedding.flatten().tolist()]
        out[req_id] = (list(r.token_ids), [[round(v, 4) for v in row] for row in r.logprobs], embedding)
    return out


def first_difference(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    """``None`` when equal; else which request differs first, and how."""
    for req_id in want:
        if req_id not in got:
            return f"{req_id}: no result"
        for what, g, w in zip(("tokens", "logprobs", "embedding"), got[req_id], want[req_id]):
            if not _same(g, w):
                return f"{req_id}: {what} {str(g)[:120]} != expected {str(w)[:120]}"
    return None


ROUNDING = 1e-4  # comparable's: two values a float's last bit apart may round to neighbours


def _same(got: Any, want: Any) -> bool:
    """Equal, floats within one step of :func:`comparable`'s rounding (tokens, ints, None: exactly)."""
    if isinstance(got, float) and isinstance(want, float):
        return got == want or abs(got - want) <= ROUNDING * 1.5  # == first: -inf, a banned token's logprob
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    return got == want


# ----------------------------------------------------------------------------- the chapters' fixes

NOTEBOOKS = {1: "01_slice_then_split", 2: "02_lazy_streams", 3: "03_pinned_transfers",
             4: "04_reverse_placeholder_scans", 5: "05_list_based_caches"}


# Each fix: the Components field, the chapter and the name its notebook defines, the exercise, the engine's pattern
# it belongs to (None: the engine has no code before it) and the PR whose code runs while it is not written.
FIXES = [
    ("all_pool", 1, "AllPoolNoSync", "1.1 and 1.2", "slice_then_split", "#41163"),
    ("output_copy_stream", 2, "AsyncOutputRunner", "2.1", "lazy_stream", "#39113"),
    ("async_tensor_h2d", 3, "async_tensor_h2d", "3.1", "pinned_uploads", "#41429"),
    ("sampler", 3, "PinnedSampler", "3.2", "pinned_uploads", "#41429"),
    ("bad_words_single_batch", 3, "_apply_bad_words_single_batch", "3.8", "pinned_uploads", "#41429"),
    ("input_batch", 4, "ReverseScanBatch", "4.1", "reverse_scan", "#42938"),
    ("placeholder_range", 5, "ListCachedRange", "5.1", "list_cache", "#40143"),
    ("scheduler", 5, "EncoderScheduler", "5.2", None, ""),
]
_STUB = re.compile(r'raise NotImplementedError\("(Exercise [\d.]+|not done yet)"\)')
_LOADED: list[Components] = []  # the fixes this process loaded last: what a run given none uses


def _folder(source: str | Path) -> Path:
    if source in ("labs", "solutions"):
        return ROOT / str(source)
    folder = Path(source).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"load_fixes: {folder} is not a folder of chapter notebooks (or say 'labs' or "
                                f"'solutions')")
    return folder.resolve()


def _notebook(folder: Path, chapter: int) -> Path:
    """Chapter ``chapter``'s notebook in ``folder``, or in its chapter folder ``ch<N>/`` (a course's layout)."""
    flat = folder / f"{NOTEBOOKS[chapter]}.ipynb"
    in_chapter = folder / f"ch{chapter}" / flat.name
    return in_chapter if not flat.exists() and in_chapter.exists() else flat


def _stamp(folder: Path) -> tuple:
    """The chapter notebooks' modification times: a loaded set of fixes is reused until one of them changes."""
    return tuple((str(path), path.stat().st_mtime_ns if path.exists() else None)
                 for path in (_notebook(folder, chapter) for chapter in NOTEBOOKS))


def _stubbed(notebook: Path, names: list[str]) -> bool:
    """Whether a cell defining one of ``names`` still holds a stub (the lab's, or nbgrader's)."""
    for cell in read_notebook(notebook).cells:
        if cell.cell_type == "code" and any(re.search(rf"^(class|def) {n}\b", cell.source, re.M) for n in names):
            if _STUB.search(cell.source):
                return True
    return False


def load_fixes(source: str | Path = "labs", quiet: bool = False) -> Components:
    """The code each fix of chapters 1-5 runs: your labs (default), a folder of notebooks, or ``"solutions"``.

    The folder may also be a course folder, where each chapter is its own folder ch1 ... ch5, as nbgrader
    hands them out (``ch1/01_slice_then_split.ipynb``, ...). The engine runs what the notebooks define,
    never a copy. An exercise not written yet (its stub is still there) is named, and the engine runs
    vLLM's code before that PR in its place (the fix's switch in :class:`EngineConfig` stays off). The
    scheduler has no such code in the lab, so while Exercise 5.2 is not written the engine runs the
    book's solution of it (the package's own copy, :mod:`synclab.capstone.chapter_fixes`), and says so.
    ``load_fixes("solutions")`` runs the book's solutions of every exercise: the book's own figures do
    (an install without ``solutions/``, as learners get it, runs the package's copies: :func:`book_fixes`).
    """
    folder = _folder(source)
    if source == "solutions" and not folder.is_dir():
        components, lines = book_fixes(), ["No solutions/ in this install: the engine runs the book's solutions of "
                                           "chapters 1-5 as the package keeps them"]
    else:
        components, lines = _load_fixes(folder, _stamp(folder))
        if source != "solutions" and components.unfinished == frozenset(PATTERNS):
            # none written: every figure would draw the code before each PR twice over, and the book's beside it
            components = book_fixes()
            lines = ["None of chapters 1-5's fixes is written in your labs yet: the engine runs the book's solutions "
                     "of them (the package's own copies), so the profile shows what the five fixes buy. Write one "
                     "and run this cell again to run yours"]
    if not quiet:
        for line in lines:
            print(line)
    _LOADED[:] = [components]
    return components


@lru_cache(maxsize=4)
def _load_fixes(folder: Path, stamp: tuple) -> tuple[Components, list[str]]:
    where = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
    loaded: dict[str, Any] = {}
    unfinished: set[str] = set()
    lines: list[str] = []
    namespaces: dict[int, dict] = {}
    if not any(_notebook(folder, chapter).exists() for chapter in NOTEBOOKS):
        raise FileNotFoundError(f"load_fixes: {folder} holds none of chapters 1-5's notebooks (nor its ch1 ... ch5 "
                                f"folders): chapter 6 runs your fixes from them")
    stood_in: set[str] = set()
    for field_name, chapter, name, task, pattern, pr in FIXES:
        notebook = _notebook(folder, chapter)
        needs = ["AllPool", name] if name == "AllPoolNoSync" else [name]
        shown = where / notebook.relative_to(folder)
        exercises = f"Exercises {task} are" if " and " in task else f"Exercise {task} is"
        # a chapter not handed in yet (a course folder before its autograding) is treated as not done
        missing = not notebook.exists()
        where_not = (f"not in {where}: no {notebook.name} there (nor in {where / f'ch{chapter}'})" if missing
                     else f"not done in {shown}")
        fix_task = task.split(" and ")[-1]  # the exercise that writes the fix (1.2 builds on 1.1)
        if not missing and pattern is not None and EXERCISES[fix_task].stretch and _stubbed(notebook, [name]) \
                and not _stubbed(notebook, [n for n in needs if n != name]):
            # a stretch left undone, its core written: the book's stretch runs in its place, the fix stays on
            if pattern in unfinished:  # ... unless the core is not written either: the line above said so
                lines.append(f"Exercise {fix_task} (a stretch) is not done in {shown} either: the {pattern} "
                             f"switch stays off, as above")
                continue
            loaded[field_name] = BOOK_FIXES[field_name]
            stood_in.add(task)
            lines.append(f"Exercise {fix_task} (a stretch) is not done in {shown}: the engine runs the book's "
                         f"solution of it in its place (the package's own copy), so the {pattern} fix stays on")
            continue
        if (missing or _stubbed(notebook, needs)) and pattern is not None:
            unfinished.add(pattern)
            if field_name == "all_pool":  # the engine's "before #41163" puts back only the split: the forward it
                loaded[field_name] = BOOK_FIXES[field_name]  # keeps clones what the engine's buffer reuse needs
            lines.append(f"{exercises} {where_not}: the engine runs vLLM's code before {pr} "
                         f"for it (the {pattern} switch stays off)")
            continue
        if missing or _stubbed(notebook, needs):  # the scheduler: no code before a PR to fall back on
            loaded[field_name] = BOOK_FIXES[field_name]
            stood_in.add(task)
            lines.append(f"{exercises} {where_not}: the engine needs a scheduler, so it runs the "
                         f"book's solution of {task} (the package's own copy) until yours is written")
            continue
        namespace = namespaces.setdefault(chapter, {})
        for needed in needs:
            loaded[field_name] = load_function(str(notebook), needed, namespace)
    if "output_copy_stream" in loaded:
        loaded["output_copy_stream"] = loaded["output_copy_stream"]._get_or_create_async_output_copy_stream
    yours = [f"{task} ({name})" for field_name, _, name, task, pattern, _ in FIXES
             if field_name in loaded and pattern not in unfinished and task not in stood_in]
    if yours:
        lines.append(f"Loaded from {where}: " + ", ".join(yours) + ". The engine runs them as written; it does not "
                     "check them: their chapters' check cells say whether they are right")
    placeholders = {f: None for f, *_ in FIXES if f not in loaded}
    return Components(**loaded, **placeholders, unfinished=frozenset(unfinished)), lines  # type: ignore[arg-type]


def book_fixes() -> Components:
    """The book's solutions of chapters 1-5, for checks that are about something else (6.1's runner, 6.2's counts).

    Kept in the package (:mod:`synclab.capstone.chapter_fixes`), not read from ``solutions/``: a learner's install
    has none. Each is the code of its solution notebook, tested equal to ``load_fixes("solutions")``.
    """
    return Components(**BOOK_FIXES)


def current_fixes() -> Components:
    """The fixes this process loaded last (the notebook's ``load_fixes(...)``); your labs' if none yet."""
    return last_loaded_fixes() or load_fixes()


def last_loaded_fixes() -> Components | None:
    """The fixes this process's last ``load_fixes(...)`` loaded, or None if it never ran (nothing is loaded here)."""
    return _LOADED[0] if _LOADED else None


# ----------------------------------------------------------------------------- what a run counts

def is_planned(event: SyncEvent) -> bool:
    """The one wait a step may make: the engine marks it with ``gpu_sync_allowed()``, as vLLM does since #44800.

    The engine wraps its wait on the previous step's output-copy event (in the placeholder
    repair, or when the output is collected) in an allowed region; every other sync is stray.
    """
    return event.allowed


_ENGINE = str(Path(__file__).resolve().parents[1] / "engine") + os.sep  # where the engine opens its planned wait


@dataclass
class StepSyncs:
    """What ``count_syncs`` saw in each step of a run."""

    stray: list[list[SyncEvent]]  # per step
    planned: list[int]  # per step
    staged: list[list[SyncEvent]] = field(default_factory=list)  # per step: uploads from pageable memory (chapter 3)
    # per step: waits marked allowed by code other than the engine's (whose region holds the step's planned wait)
    marked_by_reader: list[list[SyncEvent]] = field(default_factory=list)
    # per step: host reads of a download before it landed (a race: on a GPU they read stale memory)
    early_reads: list[list[SyncEvent]] = field(default_factory=list)

    @property
    def stray_per_step(self) -> float:
        return sum(map(len, self.stray)) / max(len(self.stray), 1)

    @property
    def syncs_per_step(self) -> float:
        return (sum(map(len, self.stray)) + sum(self.planned)) / max(len(self.stray), 1)

    def first_stray(self) -> SyncEvent | None:
        return next((e for step in self.stray for e in step), None)


@answer_key("6.2", role="counter of each step's syncs", scope="checks",
            name="ch6.step_syncs")
def step_syncs(workload: Workload, config: EngineConfig, runner_cls: RunnerClass = EngineRunner,
               components: Any = None) -> tuple[StepSyncs, dict]:
    """Run ``workload`` to the end, counting each step's syncs; returns them and the results."""
    stray: list[list[SyncEvent]] = []
    planned: list[int] = []
    staged: list[list[SyncEvent]] = []
    marked: list[list[SyncEvent]] = []
    early: list[list[SyncEvent]] = []

    @contextmanager
    def counted(engine: EngineCore) -> Iterator[None]:
        with count_syncs() as report:
            yield
        stray.append([e for e in report.events if not is_planned(e)])
        planned.append(sum(map(is_planned, report.events)))
        staged.append(list(report.staged))
        marked.append([e for e in report.events if is_planned(e) and not e.allowed_in.startswith(_ENGINE)])
        early.append(list(report.early_reads))

    results = run_engine(workload, config, components or current_fixes(), runner_cls, each_step=counted)
    return StepSyncs(stray, planned, staged, marked, early), results


# Where the code before each PR makes its syncs: the engine's file (and function) -> the pattern whose fix removes it.
SYNC_ORIGINS = {
    ("pooler_baseline.py", None): "slice_then_split",  # ALL pooling's reads before #41163
    ("model_runner.py", "_sync_device"): "lazy_stream",  # the end-of-step wait before #39113
    ("torch_utils.py", None): "pinned_uploads",  # uploads before #41429
    ("sampler.py", None): "pinned_uploads",
    ("bad_words.py", None): "pinned_uploads",
}


def sync_pattern(event: SyncEvent) -> str | None:
    """The pattern of chapters 1-5 whose code before its PR made ``event``; None for any other line (the reader's)."""
    name = Path(event.filename).name
    return SYNC_ORIGINS.get((name, event.function)) or SYNC_ORIGINS.get((name, None))


def stray_sources(syncs: StepSyncs, components: Components, config: EngineConfig | None = None) -> list[str]:
    """Stray syncs per step by where they come from, one line each, largest first.

    A sync made by the code before a PR whose exercise is not written yet is said to be so: it is not the reader's
    to hunt in 6.1, and writing that chapter's exercise removes it, in a configuration that switches the fix on
    (``config``'s switch off: the code before the PR runs whatever is written). Taught in chapter 6 (its first count).
    """
    steps = max(len(syncs.stray), 1)
    counts: dict[str | None, int] = {}
    for event in (e for step in syncs.stray for e in step):
        pattern = sync_pattern(event)
        counts[pattern] = counts.get(pattern, 0) + 1
    tasks: dict[str, list[str]] = {}
    for _, _, _, task, pattern, _ in FIXES:
        if pattern:
            tasks.setdefault(pattern, []).append(task)
    chapters = {pattern: chapter for _, chapter, _, _, pattern, _ in FIXES if pattern}
    lines = []
    for pattern, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        if pattern is None:
            why = "lines outside the five patterns' code (a runner's own features: what 6.1 hunts)"
        elif pattern in components.unfinished and (config is None or getattr(config, pattern)):
            why = (f"chapter {chapters[pattern]}'s pattern ({pattern}): its fix is not written yet (Exercise "
                   f"{' / '.join(tasks[pattern])}), so the code before it runs. Writing it removes these")
        else:
            why = f"chapter {chapters[pattern]}'s pattern ({pattern}): this configuration runs the code before its fix"
        lines.append(f"{n / steps:.2f} per step from {why}")
    return lines


def stray_lines(syncs: StepSyncs) -> list[str]:
    """The hunt's table (Exercise 6.1's scaffolding): every line that made a stray sync in the run, once per kind of
    sync it made, with how many it made per step, in file and line order. Grouped for you: what is left is to read
    them."""
    steps = max(len(syncs.stray), 1)
    seen: dict[tuple[str, int, int], tuple[SyncEvent, int]] = {}
    kinds: dict[SyncKind, int] = {}  # a line's kinds in the order met: a line that makes two kinds has two rows
    for event in (e for step in syncs.stray for e in step):
        key = (event.filename, event.lineno, kinds.setdefault(event.kind, len(kinds)))
        first, n = seen.get(key, (event, 0))
        seen[key] = (first, n + 1)
    return [f"{n / steps:5.2f} per step  {event}" for _, (event, n) in sorted(seen.items())]


DEEP_WINDOW = 64  # positions a deep request's model attends to: its attention stays small beside the host's work


def decode_workload(output_len: int, images: int, num_requests: int = 4, embeddings: int = 0,
                    hunt_features: bool = False, decode_tokens: int = 6, pooled_per_step: int | None = None,
                    model: ModelConfig = CPU_MODEL, deep: bool = False) -> Workload:
    """Requests resumed with ``output_len`` tokens already out and ``images`` images each, decoding ``decode_tokens``.

    Every other one asks for logprobs; ``embeddings`` embedding requests (12-token prompts) join them: all in
    the first step, or with ``pooled_per_step``, that many per step after the generate requests (a stream of
    pooling requests beside the decodes). ``hunt_features`` gives each a logit bias and a stop token banned by
    ``min_tokens`` (6.1's features, exercised in every step); the ban holds for the whole run but for the first
    request's, which lifts two tokens before the end: its stop token (biased to win) is sampled in the last step but
    one, and judged on the host in the last step that queues work, the step :func:`host_work_in_decode_step` counts
    (a stop hook that walks a history only when a stop arrives walks it there).
    ``deep``: the requests are resumed deep into their output on ``model`` with a sliding window, their earlier
    tokens' keys not computed again, so that ``output_len`` may be tens of thousands (the first step decodes).
    """
    if deep:
        model = replace(model, sliding_window=True, max_model_len=min(model.max_model_len, DEEP_WINDOW))
    embeds = [RequestSpec(f"embed-{i}", tuple(range(1, 13))) for i in range(embeddings)]
    specs = [] if pooled_per_step else embeds
    extras = {"logit_bias": ((4, 0.5),), "stop_token_ids": (9,), "min_tokens": 1_000} if hunt_features else {}
    stops = {"logit_bias": ((4, 0.5), (9, 30.0)), "stop_token_ids": (9,), "min_tokens": decode_tokens - 2}
    for i in range(num_requests):
        prompt: list[int] = [1, 2]
        ims = []
        for j in range(images):
            ims.append(framed_image(f"img-{i}-{j}", len(prompt), 6))
            prompt += [0] * 6 + [3]
        sampling = SamplingParams(max_tokens=decode_tokens, bad_words=((5, 7),), logprob_token_ids=(1, 2) if i % 2 else (),
                                  **(stops if hunt_features and i == 0 else extras))
        prior = tuple((i + k) % 50 + 8 for k in range(output_len))
        computed = len(prompt) + output_len - 1 if deep else 0  # deep: only the last known token is computed
        specs.append(RequestSpec(f"gen-{i}", tuple(prompt), sampling, tuple(ims), prior, computed))
    per_step = num_requests + pooled_per_step if pooled_per_step else None
    if pooled_per_step:
        specs += embeds
    return Workload(tuple(specs), SchedulerConfig(max_num_batched_tokens=2048, max_num_encoder_input_tokens=4096,
                                                  encoder_cache_size=4096, max_num_seqs=per_step), model)


def counting_histories(runner_cls: RunnerClass) -> RunnerClass:
    """``runner_cls`` whose output histories are :class:`~synclab.dispatch.CountingList`: the elements read are counted."""
    return type(f"Counted{runner_cls.__name__}", (runner_cls,), {"history_type": CountingList})


@dataclass
class HostWork:
    """One decode step's host work: torch calls plus history elements touched, and what dominated."""

    total: int
    torch_calls: dict[str, int]
    history: dict[str, int]  # elements touched, by list operation
    history_at: dict[str, str] = field(default_factory=dict)  # list operation -> the line that first read that way

    def largest(self) -> str:
        """The three largest parts, a history read with the line that made it: where to look."""
        parts = [(n, f"history: {op}", self.history_at.get(op, "")) for op, n in self.history.items()]
        parts += [(n, f"torch: {name}", "") for name, n in self.torch_calls.items()]
        return ", ".join(f"{what} x{n}" + (f" (first at {where})" if where else "")
                         for n, what, where in sorted(parts, reverse=True)[:3])


def host_work_in_decode_step(runner_cls: RunnerClass, config: EngineConfig, output_len: int, images: int,
                             components: Any = None, hunt_features: bool = False, decode_tokens: int = 6) -> HostWork:
    """:class:`HostWork` of the last decode step of :func:`decode_workload`."""
    per_step: list[HostWork] = []

    @contextmanager
    def counted(engine: EngineCore) -> Iterator[None]:
        CountingList.reset()
        with count_torch_calls() as calls:
            yield
        per_step.append(HostWork(calls.count + CountingList.touched, dict(calls.by_name), dict(CountingList.by_op),
                                 {op: CountingList.first_at[op] for op in CountingList.by_op}))

    run_engine(decode_workload(output_len, images, hunt_features=hunt_features, decode_tokens=decode_tokens), config,
               components or current_fixes(), counting_histories(runner_cls), each_step=counted)
    return per_step[-2]  # the last step that queued work (the final one only collects)


def host_work_per_decode_step(runner_cls: RunnerClass, config: EngineConfig, output_len: int, images: int,
                              components: Any = None, hunt_features: bool = False) -> int:
    """Host torch calls plus history elements touched, in the last decode step of :func:`decode_workload`."""
    return host_work_in_decode_step(runner_cls, config, output_len, images, components, hunt_features).total


def ablation_configs() -> list[EngineConfig]:
    """Baseline, then each fix alone (in chapter order), then all five."""
    return [EngineConfig.baseline(), *(EngineConfig.only(p) for p in PATTERNS), EngineConfig()]


CAPSTONE_REQUESTS = 8  # generate requests decoding together
CAPSTONE_OUTPUT_LEN = 60_000  # tokens each already produced, as in chapter 4's PR's benchmark: its scan grows with them
CAPSTONE_IMAGES = 16  # images per generate request: chapter 5's scheduler questions grow with them


def capstone_workload(decode_tokens: int = 8, model: ModelConfig = CPU_MODEL) -> Workload:
    """The ablation's workload: in every step, each of the five fixes has something to remove.

    8 requests resumed 60,000 tokens into their output (chapter 4's placeholder scan walks it), 16 images each
    (chapter 5's scheduler asks about each), decoding ``decode_tokens`` tokens with bad words and, every other one,
    logprobs (chapter 3's uploads); beside them one embedding request is pooled per step (chapter 1's reads); and
    every step ends with the output copy (chapter 2's wait). The model attends over a sliding window
    (:data:`DEEP_WINDOW` positions), so the step's own compute stays small beside the host work the fixes remove.
    """
    return decode_workload(CAPSTONE_OUTPUT_LEN, CAPSTONE_IMAGES, num_requests=CAPSTONE_REQUESTS,
                           embeddings=decode_tokens, decode_tokens=decode_tokens, pooled_per_step=1, model=model,
                           deep=True)


def ablation_workload(length: int = 64) -> Workload:
    """4 decoding requests with 4 images each (2 of them asking for logprobs) and 2 embedding requests."""
    return decode_workload(length, images=4, embeddings=2)
