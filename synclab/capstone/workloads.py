"""Request mixes for chapter 6's engine, and running the engine over one.

Taught in chapter 6 (the capstone). A mix is plain data (:class:`RequestSpec`), so the
same mix can be built for any :class:`~synclab.engine.engine_core.EngineConfig`: each
config needs its own ``PlaceholderRange`` class and fresh request objects.
"""

from __future__ import annotations

import random
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

from synclab.device import has_cuda
from synclab.engine import sim_cuda
from synclab.engine.engine_core import (Components, EngineConfig, EngineCore, EngineRequest, EngineRunner, ImageInput,
                                        RequestResult, SamplingParams, make_request)
from synclab.engine.mm_inputs import PlaceholderRangeBaseline
from synclab.engine.scheduler import SchedulerConfig
from synclab.engine.tiny_llm import CPU_MODEL, ModelConfig


@dataclass(frozen=True)
class RequestSpec:
    request_id: str
    prompt_token_ids: tuple[int, ...]
    sampling: SamplingParams | None = None  # None: an embedding request
    images: tuple[ImageInput, ...] = ()
    prior_output_token_ids: tuple[int, ...] = ()


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


def _hunt_params(rng: random.Random, vocab: int) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if rng.random() < 0.6:
        params["logit_bias"] = tuple((rng.randrange(vocab), rng.choice((-30.0, 30.0))) for _ in range(rng.randint(1, 3)))
    if rng.random() < 0.7:
        params["stop_token_ids"] = tuple(rng.sample(range(vocab), vocab // 6))  # a stop is likely within a few tokens
        params["min_tokens"] = rng.choice((0, 0, 2, 4))
    return params


def build_requests(workload: Workload, config: EngineConfig, components: Components) -> list[EngineRequest]:
    range_cls = components.placeholder_range if config.list_cache else PlaceholderRangeBaseline
    return [make_request(s.request_id, list(s.prompt_token_ids), range_cls, s.sampling, s.images,
                         list(s.prior_output_token_ids)) for s in workload.requests]


def engine_for(workload: Workload, config: EngineConfig, components: Components,
               runner_cls: type[EngineRunner] = EngineRunner) -> EngineCore:
    return EngineCore(config, components, build_requests(workload, config, components), workload.model,
                      workload.scheduler, runner_cls)


def device_context() -> ContextManager[Any]:
    """Where the engine runs: the real device, or simulated streams on a CPU (so the async path runs)."""
    return nullcontext() if has_cuda() else sim_cuda.simulated_cuda()


def run_engine(workload: Workload, config: EngineConfig, components: Components,
               runner_cls: type[EngineRunner] = EngineRunner, max_steps: int = 2_000,
               each_step: Callable[[EngineCore], ContextManager[Any]] | None = None
               ) -> dict[str, RequestResult]:
    """Run every request of ``workload`` to the end; ``each_step(engine)`` may wrap each step (to count it)."""
    with device_context():
        engine = engine_for(workload, config, components, runner_cls)
        while engine.has_work:
            if engine.steps >= max_steps:
                raise RuntimeError(f"the engine did not finish in {max_steps} steps")
            with each_step(engine) if each_step else nullcontext():
                engine.step()
        return engine.results


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
            if g != w:
                return f"{req_id}: {what} {str(g)[:120]} != expected {str(w)[:120]}"
    return None

