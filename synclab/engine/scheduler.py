"""A small vLLM scheduler: running requests, a token budget, and the multimodal encoder inputs.

Taught in chapter 5 (list-based caches). Names follow ``vllm/v1/core/sched/scheduler.py``.
Every step, :meth:`Scheduler.schedule` walks the running requests; for each one
with multimodal items it calls ``_try_schedule_encoder_inputs``, which walks the
request's items and asks each one's :class:`PlaceholderRange` for its number of
embeddings. A decoding request with 32 images asks 32 times per step, although
every image was encoded long ago: that per-query cost is what PR #40143 cut.

Simplified from vLLM, and said so: no preemption, no waiting queue (every
request is running), no KV-cache blocks, no encoder-decoder models, no external
encoder cache (``ec_connector``), no EAGLE shift. A step's "model" computes every
scheduled token; a request that has computed its whole prompt samples one token
per step until ``max_tokens``.

* :class:`Request` and :class:`SchedulerConfig`;
* :class:`Scheduler` — the step loop; the reader writes ``_try_schedule_encoder_inputs``
  (Exercise 5.2) in a subclass;

The checks compare the reader's decisions with a plain reference kept in the chapter's checks room.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from synclab.engine.encoder_cache_manager import EncoderCacheManager
from synclab.engine.mm_inputs import MultiModalFeatureSpec


@dataclass
class Request:
    request_id: str
    num_prompt_tokens: int
    mm_features: list[MultiModalFeatureSpec] = field(default_factory=list)  # sorted by offset
    max_tokens: int = 1
    num_computed_tokens: int = 0
    num_output_tokens: int = 0

    @property
    def has_encoder_inputs(self) -> bool:
        return len(self.mm_features) > 0

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + self.num_output_tokens

    def get_num_encoder_embeds(self, input_id: int) -> int:
        return self.mm_features[input_id].mm_position.get_num_embeds()

    @property
    def is_finished(self) -> bool:
        return self.num_output_tokens >= self.max_tokens


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_batched_tokens: int = 2048  # token budget per step
    max_num_encoder_input_tokens: int = 2048  # encoder budget per step, in embeddings
    encoder_cache_size: int = 4096  # in embeddings
    disable_chunked_mm_input: bool = False  # never split an item's placeholders over two steps
    max_num_seqs: int | None = None  # requests scheduled per step, in order (None: as many as the budgets allow)


@dataclass
class SchedulerOutput:
    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)
    scheduled_encoder_inputs: dict[str, list[int]] = field(default_factory=dict)
    encoder_compute_budget_left: int = 0
    token_budget_left: int = 0

    def as_tuple(self) -> tuple:
        """Everything a step decided, as plain values (for comparing two schedulers)."""
        return (self.num_scheduled_tokens, self.scheduled_encoder_inputs, self.encoder_compute_budget_left,
                self.token_budget_left)


class Scheduler:
    def __init__(self, config: SchedulerConfig, requests: list[Request] | None = None) -> None:
        self.scheduler_config = config
        self.encoder_cache_manager = EncoderCacheManager(config.encoder_cache_size)
        self.running: list[Request] = list(requests or [])

    def add_request(self, request: Request) -> None:
        self.running.append(request)

    def schedule(self) -> SchedulerOutput:
        """One step: give each running request, in order, as many tokens as the budgets allow."""
        config = self.scheduler_config
        token_budget = config.max_num_batched_tokens
        encoder_compute_budget = config.max_num_encoder_input_tokens
        output = SchedulerOutput()
        for request in self.running:
            if token_budget == 0 or len(output.num_scheduled_tokens) == config.max_num_seqs:
                break
            num_new_tokens = min(request.num_tokens - request.num_computed_tokens, token_budget)
            encoder_inputs_to_schedule: list[int] = []
            new_encoder_compute_budget = encoder_compute_budget
            if request.has_encoder_inputs:
                encoder_inputs_to_schedule, num_new_tokens, new_encoder_compute_budget = (
                    self._try_schedule_encoder_inputs(request, request.num_computed_tokens, num_new_tokens,
                                                      encoder_compute_budget))
            if num_new_tokens == 0:
                continue  # this request waits: its budget is not taken
            output.num_scheduled_tokens[request.request_id] = num_new_tokens
            token_budget -= num_new_tokens
            if encoder_inputs_to_schedule:
                output.scheduled_encoder_inputs[request.request_id] = encoder_inputs_to_schedule
                for input_id in encoder_inputs_to_schedule:
                    self.encoder_cache_manager.allocate(request, input_id)
                encoder_compute_budget = new_encoder_compute_budget
        output.encoder_compute_budget_left = encoder_compute_budget
        output.token_budget_left = token_budget
        return output

    def update_from_output(self, output: SchedulerOutput) -> None:
        """The step ran: advance each request, sample a token where the prompt is done, free what is finished."""
        for request in self.running:
            num_tokens = output.num_scheduled_tokens.get(request.request_id, 0)
            request.num_computed_tokens += num_tokens
            if num_tokens and request.num_computed_tokens >= request.num_tokens:
                request.num_output_tokens += 1  # the sampled token, computed next step
            self._free_encoder_inputs(request)
        self.running = [r for r in self.running if not r.is_finished]

    def _free_encoder_inputs(self, request: Request) -> None:
        """An item's embeddings are needed until every one of its positions is in the KV cache."""
        for input_id in self.encoder_cache_manager.get_cached_input_ids(request):
            pos = request.mm_features[input_id].mm_position
            if request.is_finished or pos.offset + pos.length <= request.num_computed_tokens:
                self.encoder_cache_manager.free_encoder_input(request, input_id)

    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_compute_budget: int) -> tuple[list[int], int, int]:
        """Which of ``request``'s items must be encoded this step; ``num_new_tokens`` and the budget, adjusted."""
        raise NotImplementedError("Exercise 5.2: _try_schedule_encoder_inputs")
