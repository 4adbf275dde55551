"""A miniature async engine: one step of vLLM's ``EngineCore`` with all five patterns in it.

Taught in chapter 6 (the capstone). A step schedules (chapter 5's scheduler and
``PlaceholderRange``), prepares inputs and uploads them (chapter 3), runs the
vision encoder and a real transformer forward (:mod:`synclab.engine.tiny_llm`),
pools embedding requests with ALL pooling (chapter 1), samples with bad words and
requested logprobs after repairing the ``-1`` placeholders (chapters 3 and 4), and
copies its output to the host (chapter 2). Under async scheduling the host queues
step *k+1* before it reads step *k*'s output.

:class:`EngineConfig` switches each pattern between its baseline (the code before
the PR) and its fix (:class:`Components` says which code each side runs). The
switches change only host bookkeeping: every combination computes the same tokens.

* :class:`EngineRequest` — a generate request (:class:`SamplingParams`) or an embedding request;
* :class:`EngineRunner` — the worker side: ``execute_model`` queues one step;
* :class:`EngineCore` — the loop: schedule, queue, then collect the previous step.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any, Callable, Iterator

import torch

from synclab.device import DeviceLike, mark_device, pick_device
from synclab.sim import cuda as sim_cuda
from synclab.engine.bad_words import SingleBatchFunction, _apply_bad_words_single_batch_baseline, apply_bad_words
from synclab.engine.input_batch import CachedRequestState, InputBatch, append_placeholders
from synclab.engine.input_batch_baseline import InputBatchBaseline
from synclab.engine.mm_inputs import MultiModalFeatureSpec, PlaceholderRange, PlaceholderRangeBaseline, make_mask
from synclab.engine.model_runner import PoolingModelRunner
from synclab.engine.platform import current_platform
from synclab.engine.pool_metadata import PoolingMetadata, PoolingParams, PoolingStates
from synclab.engine.pooler import DispatchPooler, TokenPoolingMethod
from synclab.engine.pooler_baseline import with_split_before_41163
from synclab.engine.sampler import Sampler, SamplerBaseline
from synclab.engine.scheduler import Request, Scheduler, SchedulerConfig, SchedulerOutput
from synclab.engine.tiny_llm import CPU_MODEL, ModelConfig, TinyDecoder
from synclab.engine.torch_utils import async_tensor_h2d_baseline
from synclab.syncs import gpu_sync_allowed

PATTERNS = ("slice_then_split", "lazy_stream", "pinned_uploads", "reverse_scan", "list_cache")


@dataclass(frozen=True)
class EngineConfig:
    """Which side of each pattern the step runs: True is the fix, False the code before its PR."""

    slice_then_split: bool = True  # ch1: ALL pooling slices the sub-group, splits by host sizes
    lazy_stream: bool = True  # ch2: the output copy on a side stream made on first use, waited for late
    pinned_uploads: bool = True  # ch3: inputs, logprob ids and bad words go up without a wait
    reverse_scan: bool = True  # ch4: placeholders found from the end of the output
    list_cache: bool = True  # ch5: PlaceholderRange's cumsum cached as a list

    @classmethod
    def baseline(cls) -> EngineConfig:
        return cls(**{p: False for p in PATTERNS})

    @classmethod
    def only(cls, pattern: str) -> EngineConfig:
        """The baseline with one fix: what that fix buys alone."""
        return replace(cls.baseline(), **{pattern: True})

    @classmethod
    def all_combinations(cls) -> Iterator[EngineConfig]:
        for values in product((False, True), repeat=len(PATTERNS)):
            yield cls(**dict(zip(PATTERNS, values)))

    @property
    def label(self) -> str:
        on = [p for p in PATTERNS if getattr(self, p)]
        if not on:
            return "baseline"
        return "all fixes" if len(on) == len(PATTERNS) else " + ".join(on)


@dataclass
class Components:
    """The code each fix runs: the reader's chapter solutions (``synclab.capstone.load_fixes``).

    The baselines are the package's own; a fix is taken from the chapter that teaches it, never rewritten.
    """

    all_pool: type[TokenPoolingMethod]  # 1.2 AllPoolNoSync
    output_copy_stream: Callable[[Any], Any]  # 2.1 AsyncOutputRunner._get_or_create_async_output_copy_stream
    async_tensor_h2d: Callable[..., torch.Tensor]  # 3.1
    sampler: type[Sampler]  # 3.2 PinnedSampler
    bad_words_single_batch: SingleBatchFunction  # 3.8 _apply_bad_words_single_batch
    input_batch: type[InputBatch]  # 4.1 ReverseScanBatch
    placeholder_range: type[PlaceholderRange]  # 5.1 ListCachedRange
    scheduler: type[Scheduler]  # 5.2 EncoderScheduler (both sides: PR #40143 changed the range, not the loop)
    unfinished: frozenset[str] = frozenset()  # patterns whose fix is not written yet: they run the code before it

    def effective(self, config: EngineConfig) -> EngineConfig:
        """``config`` with every unfinished fix switched to the code before its PR (what really runs)."""
        return replace(config, **{p: False for p in self.unfinished})

    def label_for(self, config: EngineConfig) -> str:
        """``config``'s label, saying which of its fixes are not written yet (they run the code before their PR)."""
        missing = [p for p in PATTERNS if getattr(config, p) and p in self.unfinished]
        if not missing:
            return config.label
        return f"{config.label} ({', '.join(missing)} not written: runs the code before its PR)"


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 8
    logprob_token_ids: tuple[int, ...] = ()  # logprobs of these ids, every step (chapter 3's scoring API)
    bad_words: tuple[tuple[int, ...], ...] = ()  # token sequences never to complete
    # Sampling features chapter 6's sync hunt adds (synclab.capstone.planted); the base engine ignores them.
    logit_bias: tuple[tuple[int, float], ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    min_tokens: int = 0  # stop tokens are banned until this many tokens were generated


@dataclass(frozen=True)
class ImageInput:
    identifier: str  # content hash: the same image in two requests is encoded once
    offset: int  # first placeholder position in the prompt
    length: int
    is_embed: str | None = None  # "FTTF": which positions get an embedding; None: all


@dataclass
class EngineRequest(Request):
    """A request as the engine sees it: the scheduler's fields, plus what the model needs."""

    prompt_token_ids: list[int] = field(default_factory=list)
    prior_output_token_ids: list[int] = field(default_factory=list)  # a resumed request's tokens so far
    sampling: SamplingParams | None = None  # None: an embedding request (ALL pooling)
    stopped: bool = False  # a stop token came back

    @property
    def is_pooling(self) -> bool:
        return self.sampling is None

    @property
    def is_finished(self) -> bool:
        return self.stopped or super().is_finished

    def known_token_ids(self, start: int, n: int) -> list[int]:
        """The ids of positions ``start`` .. ``start + n - 1``, -1 past what the host knows (sampled on the device).

        Sliced from the prompt and the earlier output, never joined: a request 60,000 tokens into its output
        costs a step no more than a short one.
        """
        prompt, prior = self.prompt_token_ids, self.prior_output_token_ids
        ids = prompt[start:start + n] + prior[max(start - len(prompt), 0):max(start + n - len(prompt), 0)]
        return ids + [-1] * (n - len(ids))


def make_request(request_id: str, prompt_token_ids: list[int], range_cls: type[PlaceholderRange],
                 sampling: SamplingParams | None = None, images: tuple[ImageInput, ...] = (),
                 prior_output_token_ids: list[int] | None = None, num_computed_tokens: int = 0) -> EngineRequest:
    """``num_computed_tokens``: positions whose keys the run does not compute (a request resumed deep into its
    output, on a sliding-window model: its next steps see only what this run writes)."""
    prior = list(prior_output_token_ids or [])
    features = [MultiModalFeatureSpec(im.identifier, range_cls(im.offset, im.length,
                                                              None if im.is_embed is None else make_mask(im.is_embed)))
                for im in images]
    return EngineRequest(request_id, len(prompt_token_ids) + len(prior), features,
                         max_tokens=sampling.max_tokens if sampling else 1, prompt_token_ids=list(prompt_token_ids),
                         prior_output_token_ids=prior, sampling=sampling, num_computed_tokens=num_computed_tokens)


@dataclass
class EngineOutput:
    """One step's results on the host."""

    req_ids: list[str]  # the sampling rows, in order
    sampled_token_ids: list[int]
    logprobs: dict[str, list[float]] = field(default_factory=dict)  # req_id -> sampled token, then requested ids
    pooled: dict[str, torch.Tensor] = field(default_factory=dict)  # req_id -> [prompt_len, hidden]
    stopped: set[str] = field(default_factory=set)  # requests a stop check on the device already flagged


class _ReadyEvent:
    """The event of an output copied synchronously: already complete."""

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class _OutputCopyEvent:
    """The event recorded after a step's output copies, waited for at most once.

    The placeholder repair (chapter 4) may wait for it first; collecting the output then waits no more. Whether
    it was waited for is remembered, not asked of the device: on a GPU ``query()`` may find a short step's copy
    already done, and the step's count of planned waits would then depend on timing.
    """

    def __init__(self) -> None:
        self.event = torch.cuda.Event(blocking=True)  # the host sleeps while it waits (chapter 2)
        self.waited = False

    def record(self) -> None:
        self.event.record()

    def synchronize(self) -> None:
        if not self.waited:
            self.event.synchronize()
            self.waited = True

    def query(self) -> bool:
        return self.waited or self.event.query()


class PendingOutput:
    """A step's output on its way to the host: valid once the event recorded after its copies completes."""

    def __init__(self, req_ids: list[str], tensors: dict[str, Any], stopped: set[str], event: Any,
                 sources: tuple = ()) -> None:
        self.req_ids, self._host, self.stopped, self.event = req_ids, tensors, stopped, event
        # the device tensors being copied, kept until the output is collected (as vLLM's async output keeps its
        # sampled ids): dropped earlier, their memory could be reused on the compute stream before the side stream
        # had copied it
        self._sources = sources

    def get_output(self) -> EngineOutput:
        if not getattr(self.event, "waited", True):  # the placeholder repair may have waited: no second wait
            with gpu_sync_allowed():  # the step's one planned wait, marked as vLLM marks one (#44800)
                self.event.synchronize()
        host = self._host
        out = EngineOutput(list(self.req_ids), host["sampled"].tolist() if "sampled" in host else [],
                           stopped=set(self.stopped))
        if "logprobs" in host:
            for row, req_id in host["logprob_rows"]:
                out.logprobs[req_id] = host["logprobs"][row].tolist()
        for req_id, tensor in host.get("pooled", {}).items():
            out.pooled[req_id] = tensor
        return out


@lru_cache(maxsize=4)
def shared_model(config: ModelConfig, device: DeviceLike) -> TinyDecoder:
    """One model per config and device: every position a step reads, this run wrote first, so runs can share it."""
    return TinyDecoder(config, device)


def image_pixels(identifier: str, num_embeds: int, feature_size: int) -> torch.Tensor:
    """An image's encoder input, made up from its identifier: [num_embeds, feature_size] (host)."""
    seed = int.from_bytes(hashlib.sha256(identifier.encode()).digest()[:4], "little")
    return torch.randn(num_embeds, feature_size, generator=torch.Generator().manual_seed(seed))


@dataclass
class _StepLayout:
    """Where each scheduled request's tokens sit in the flat batch (host lists, built each step)."""

    input_ids: list[int] = field(default_factory=list)  # -1: take the token sampled last step (on the device)
    positions: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    mm_token_index: list[int] = field(default_factory=list)  # flat positions that take an image embedding
    mm_rows: list[tuple[str, int, int]] = field(default_factory=list)  # (image, first row, end row) to fill them
    pool_reqs: list[EngineRequest] = field(default_factory=list)
    pool_scheduled: list[int] = field(default_factory=list)
    sample_reqs: list[EngineRequest] = field(default_factory=list)
    logits_index: list[int] = field(default_factory=list)  # flat index of each sampling row's last token
    max_len: int = 0


class EngineRunner:
    """The worker: keeps the model, the KV-cache slots and the async state; ``execute_model`` queues a step."""

    history_type: Callable[[list[int]], Any] = list  # the output histories' type (chapter 6 counts its own)

    def __init__(self, config: EngineConfig, components: Components, model_config: ModelConfig = CPU_MODEL,
                 device: DeviceLike | None = None) -> None:
        self.config, self.components = config, components
        self.device = pick_device() if device is None else device
        self.model = shared_model(model_config, self.device)
        self.sampler = components.sampler() if config.pinned_uploads else SamplerBaseline()
        all_pool = components.all_pool if config.slice_then_split else with_split_before_41163(components.all_pool)
        pool = all_pool(enable_chunked_prefill=True, async_scheduling=True)
        self.pooler = DispatchPooler({"token_embed": pool}, slice_groups=config.slice_then_split)
        self.async_output_copy_stream = None  # created on first use by the chapter 2 fix
        self.prev_sampled = self.upload([0] * model_config.max_num_seqs, torch.int64)  # [slots] last sampled token
        self.slots: dict[str, int] = {}
        self.free_slots = list(range(model_config.max_num_seqs - 1, -1, -1))
        self.states: dict[str, CachedRequestState] = {}  # output histories, with -1 while in flight
        self.pooling_states: dict[str, PoolingStates] = {}
        self.encoder_cache: dict[str, torch.Tensor] = {}  # image -> [num_embeds, hidden] device
        self.prev_req_id_to_index: dict[str, int] = {}
        self.prev_sampled_cpu: torch.Tensor | None = None
        self.prev_event: Any = None

    # ------------------------------------------------------------------ uploads and the host-side layout

    def upload(self, data: list | torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Host data (a list or a CPU tensor) to the device: chapter 3's ``async_tensor_h2d``, or a blocking upload before the fix."""
        h2d = self.components.async_tensor_h2d if self.config.pinned_uploads else async_tensor_h2d_baseline
        return mark_device(h2d(data, self.device, dtype))

    def _slot_for(self, request: EngineRequest) -> int:
        if request.request_id not in self.slots:
            if not self.free_slots:
                raise RuntimeError(f"more running requests than the model's {self.model.config.max_num_seqs} "
                                   "KV-cache slots (ModelConfig.max_num_seqs)")
            self.slots[request.request_id] = self.free_slots.pop()
            self.model.forget_slot(self.slots[request.request_id])
        return self.slots[request.request_id]

    def release(self, request: EngineRequest) -> None:
        """The request is done: its slot is free for another (the device's queue keeps the order)."""
        slot = self.slots.pop(request.request_id, None)
        if slot is not None:
            self.free_slots.append(slot)
        self.states.pop(request.request_id, None)
        self.pooling_states.pop(request.request_id, None)

    def _layout(self, scheduled: list[tuple[EngineRequest, int]]) -> _StepLayout:
        layout = _StepLayout()
        # Embedding requests first: ALL pooling then gets the first rows of the flat batch.
        for request, n in sorted(scheduled, key=lambda item: not item[0].is_pooling):
            start = request.num_computed_tokens
            flat_start, slot = len(layout.input_ids), self._slot_for(request)
            layout.input_ids += request.known_token_ids(start, n)
            layout.positions += range(start, start + n)
            layout.slots += [slot] * n
            layout.max_len = max(layout.max_len, start + n)
            for feature in request.mm_features:
                self._place_image(layout, feature, start, n, flat_start)
            if request.is_pooling:
                layout.pool_reqs.append(request)
                layout.pool_scheduled.append(n)
            elif start + n >= request.num_prompt_tokens:  # the window reaches the end: this step samples a token
                layout.sample_reqs.append(request)
                layout.logits_index.append(flat_start + n - 1)
        return layout

    def _place_image(self, layout: _StepLayout, feature: MultiModalFeatureSpec, start: int, n: int,
                     flat_start: int) -> None:
        """Which of the step's positions take this image's embeddings, and which rows of its encoder output."""
        pos = feature.mm_position
        lo, hi = max(start, pos.offset), min(start + n, pos.offset + pos.length)
        if lo >= hi:
            return  # the image is not in this step's window
        first, end = pos.get_embeds_indices_in_range(lo - pos.offset, hi - pos.offset)
        if first == end:
            return
        mask = [True] * pos.length if pos.is_embed is None else pos.is_embed[lo - pos.offset:hi - pos.offset].tolist()
        layout.mm_token_index += [flat_start + (p - start) for p, e in zip(range(lo, hi), mask) if e]
        layout.mm_rows.append((feature.identifier, first, end))

    def _encode(self, scheduler_output: SchedulerOutput, requests: dict[str, EngineRequest]) -> None:
        """Run the vision encoder on the items scheduled this step; keep their embeddings on the device."""
        for req_id, input_ids in scheduler_output.scheduled_encoder_inputs.items():
            for i in input_ids:
                feature = requests[req_id].mm_features[i]
                num_embeds = feature.mm_position.get_num_embeds()
                pixels = image_pixels(feature.identifier, num_embeds, self.model.config.image_feature_size)
                self.encoder_cache[feature.identifier] = self.model.encode_images(self.upload(pixels, torch.float32))

    # ------------------------------------------------------------------ one step

    def execute_model(self, scheduler_output: SchedulerOutput, requests: dict[str, EngineRequest],
                      freed_images: list[str]) -> PendingOutput:
        """Queue one step on the device and return its output, on its way to the host."""
        for identifier in freed_images:
            self.encoder_cache.pop(identifier, None)
        scheduled = [(requests[r], n) for r, n in scheduler_output.num_scheduled_tokens.items()]
        layout = self._layout(scheduled)
        self._encode(scheduler_output, requests)
        input_ids = self.upload(layout.input_ids, torch.int64)  # [T]
        slots = self.upload(layout.slots, torch.int64)  # [T]
        positions = self.upload(layout.positions, torch.int64)  # [T]
        input_ids = torch.where(input_ids >= 0, input_ids, self.prev_sampled[slots])  # decode: last step's token
        inputs_embeds = self.model.embed(input_ids)  # [T, hidden]
        if layout.mm_token_index:
            rows = torch.cat([self.encoder_cache[image][first:end] for image, first, end in layout.mm_rows])
            inputs_embeds[self.upload(layout.mm_token_index, torch.int64)] = rows  # [num_mm_tokens, hidden]
        hidden_states = self.model(inputs_embeds, slots, positions, layout.max_len)  # [T, hidden], queued
        tensors: dict[str, Any] = {}
        if layout.pool_reqs:
            tensors["pooled_raw"] = self._pool(hidden_states, layout)
        stopped: set[str] = set()
        if layout.sample_reqs:
            tensors.update(self._sample(hidden_states, layout))
            stopped = self._stopped_on_device(tensors["sampled_gpu"], layout.sample_reqs)
        return self._copy_to_host([r.request_id for r in layout.sample_reqs], tensors, stopped)

    def _pool(self, hidden_states: torch.Tensor, layout: _StepLayout) -> dict[str, torch.Tensor]:
        """Chapter 1: the embedding requests' hidden states, one tensor per finished prompt."""
        reqs = layout.pool_reqs
        meta = PoolingMetadata(prompt_lens=torch.tensor([r.num_prompt_tokens for r in reqs], dtype=torch.int64),
                               pooling_params=[PoolingParams("token_embed")] * len(reqs),
                               pooling_states=[self.pooling_states.setdefault(r.request_id, PoolingStates())
                                               for r in reqs])
        scheduled = torch.tensor(layout.pool_scheduled, dtype=torch.int64)
        computed = torch.tensor([r.num_computed_tokens + n for r, n in zip(reqs, layout.pool_scheduled)])
        meta.build_pooling_cursor(scheduled, computed, self.device)
        outputs = self.pooler(hidden_states, meta)
        return {r.request_id: out for r, out in zip(reqs, outputs) if out is not None}

    def _sample(self, hidden_states: torch.Tensor, layout: _StepLayout) -> dict[str, Any]:
        """Greedy sampling with bad words and requested logprobs, after the placeholders are repaired."""
        reqs = layout.sample_reqs
        logits = self.model.compute_logits(hidden_states[self.upload(layout.logits_index, torch.int64)])  # [S, V]
        batch = (self.components.input_batch if self.config.reverse_scan else InputBatchBaseline)()
        for request in reqs:
            if request.request_id not in self.states:  # made once: a long history is not copied every step
                self.states[request.request_id] = CachedRequestState(
                    request.request_id, request.prompt_token_ids, self.history_type(request.prior_output_token_ids))
            batch.add_request(self.states[request.request_id])
        batch.prev_req_id_to_index = self.prev_req_id_to_index
        batch.set_async_sampled_token_ids(self.prev_sampled_cpu, self.prev_event)
        self._apply_sampling_extras(logits, reqs)
        with gpu_sync_allowed():  # its wait on the last step's copy is planned; chapter 4 checks it waits once
            batch.update_async_output_token_ids()  # chapter 4: the history must be real before bad words read it
        bad_words = {row: [list(w) for w in r.sampling.bad_words] for row, r in enumerate(reqs) if r.sampling.bad_words}
        single = self.components.bad_words_single_batch if self.config.pinned_uploads else \
            _apply_bad_words_single_batch_baseline
        apply_bad_words(logits, bad_words, batch.req_output_token_ids, single_batch=single)
        sampled = logits.argmax(dim=-1)  # [S] int64
        slots = self.upload([self.slots[r.request_id] for r in reqs], torch.int64)
        self.prev_sampled[slots] = sampled  # the next step's input ids, without a trip to the host
        wanted = {row: list(r.sampling.logprob_token_ids) for row, r in enumerate(reqs) if r.sampling.logprob_token_ids}
        logprobs = self.sampler.gather_specific_token_logprobs(logits, wanted, sampled)
        for request in reqs:
            append_placeholders(self.states[request.request_id])  # in flight until the next step repairs it
        self.prev_req_id_to_index = {r.request_id: row for row, r in enumerate(reqs)}
        out: dict[str, Any] = {"sampled_gpu": sampled}
        if logprobs is not None:
            out["logprobs_gpu"] = logprobs.logprobs
            out["logprob_rows"] = [(row, reqs[row].request_id) for row in sorted(wanted)]
        return out

    def _copy_to_host(self, req_ids: list[str], tensors: dict[str, Any], stopped: set[str]) -> PendingOutput:
        """Chapter 2: on a side stream created on first use, waited for late; before the fix, copy and wait."""
        to_copy = {"sampled": tensors.get("sampled_gpu"), "logprobs": tensors.get("logprobs_gpu")}
        pooled = tensors.get("pooled_raw", {})
        cuda_alike = current_platform.is_cuda_alike()
        if self.config.lazy_stream and cuda_alike:
            stream = self.components.output_copy_stream(self)
            event = _OutputCopyEvent()
            stream.wait_stream(torch.cuda.current_stream())  # copy only what the step has written
            with torch.cuda.stream(stream):
                host = self._queue_copies(to_copy, pooled)
                event.record()
        else:
            host = self._queue_copies(to_copy, pooled)
            PoolingModelRunner._sync_device(self)  # type: ignore[arg-type]  # the host waits for the whole device
            event = _ReadyEvent()
        if "logprob_rows" in tensors:
            host["logprob_rows"] = tensors["logprob_rows"]
        self.prev_sampled_cpu = host["sampled"].reshape(-1, 1) if "sampled" in host else None  # [S, 1]
        self.prev_event = event
        return PendingOutput(req_ids, host, stopped, event, sources=(to_copy, pooled))

    @staticmethod
    def _queue_copies(to_copy: dict[str, torch.Tensor | None], pooled: dict[str, torch.Tensor]) -> dict[str, Any]:
        host: dict[str, Any] = {k: sim_cuda.copy_to_host_async(t) for k, t in to_copy.items() if t is not None}
        host["pooled"] = {req_id: sim_cuda.copy_to_host_async(t) for req_id, t in pooled.items()}
        return host

    # ------------------------------------------------------------------ hooks for sampling features

    def _apply_sampling_extras(self, logits: torch.Tensor, reqs: list[EngineRequest]) -> None:
        """Logit bias, min_tokens: the base engine has none (chapter 6's hunt adds them)."""

    def _stopped_on_device(self, sampled: torch.Tensor, reqs: list[EngineRequest]) -> set[str]:
        """Requests whose sampled token stops them, decided on the device side; the base engine has no stop tokens."""
        return set()

    def stopped_on_host(self, output: EngineOutput, requests: dict[str, EngineRequest]) -> set[str]:
        """Requests whose sampled token stops them, decided from the host copy; the base engine has none."""
        return set()


@dataclass
class RequestResult:
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[list[float]] = field(default_factory=list)
    embedding: torch.Tensor | None = None


class EngineCore:
    """The loop: ``step()`` schedules and queues step *k*, then collects step *k-1*'s output (async scheduling)."""

    def __init__(self, config: EngineConfig, components: Components, requests: list[EngineRequest],
                 model_config: ModelConfig = CPU_MODEL, scheduler_config: SchedulerConfig | None = None,
                 runner_cls: type[EngineRunner] = EngineRunner, device: DeviceLike | None = None) -> None:
        config = components.effective(config)
        self.runner = runner_cls(config, components, model_config, device)
        self.scheduler = components.scheduler(scheduler_config or SchedulerConfig(max_num_batched_tokens=256),
                                              list(requests))
        self.requests = {r.request_id: r for r in requests}
        self.results = {r.request_id: RequestResult() for r in requests}
        self.in_flight: PendingOutput | None = None
        self.steps = 0

    @property
    def has_work(self) -> bool:
        return bool(self.scheduler.running) or self.in_flight is not None

    def step(self) -> None:
        scheduler_output = self.scheduler.schedule()
        manager = self.scheduler.encoder_cache_manager
        freed, manager.freed = manager.freed, []
        pending = None
        if scheduler_output.num_scheduled_tokens:
            pending = self.runner.execute_model(scheduler_output, self.requests, freed)  # queued, not done
        self.scheduler.update_from_output(scheduler_output)  # optimistic: the step's tokens count as computed
        if self.in_flight is not None:
            self._process(self.in_flight.get_output())  # the step before: its copy ran while this one queued
        self.in_flight = pending
        for request in self.requests.values():
            if request.is_finished:
                self.runner.release(request)  # the device's queue orders the slot's next use after this step
        self.steps += 1

    def _process(self, output: EngineOutput) -> None:
        stopped = output.stopped | self.runner.stopped_on_host(output, self.requests)
        for req_id, token in zip(output.req_ids, output.sampled_token_ids):
            request = self.requests[req_id]
            if request.stopped:
                continue  # it stopped a step ago; this token was computed in flight and is dropped
            self.results[req_id].token_ids.append(token)
            if req_id in output.logprobs:
                self.results[req_id].logprobs.append(output.logprobs[req_id])
            if req_id in stopped:
                request.stopped = True
        for req_id, tensor in output.pooled.items():
            self.results[req_id].embedding = tensor
        self.scheduler.running = [r for r in self.scheduler.running if not r.is_finished]

    def run(self, max_steps: int = 10_000) -> dict[str, RequestResult]:
        while self.has_work:
            if self.steps >= max_steps:
                raise RuntimeError(f"the engine did not finish in {max_steps} steps")
            self.step()
        return self.results

