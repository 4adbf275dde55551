"""Scheduling multimodal requests, translated from vLLM's ``tests/v1/core/test_scheduler.py``.

Translated: ``test_schedule_multimodal_requests``, ``test_schedule_partial_requests`` and
``test_no_mm_input_chunking``, with the cases and numbers as at vLLM PR #40143 (unchanged on
vLLM main in Aug 2026). Schedulers under test: Exercise 5.2's ``EncoderScheduler`` and the
lab's ``_SchedulerReference`` (``synclab/list_caches/checks.py``); item ranges are Exercise
5.1's ``ListCachedRange``.

Adapted:

* vLLM's ``create_scheduler(model="llava-hf/llava-1.5-7b-hf", max_num_batched_tokens=N)``
  derives an encoder budget and an encoder cache size of ``max(N, 576)`` (576: llava's
  largest item). The lab has no model, so :func:`_config` passes those derived values.
* vLLM's ``create_requests`` becomes ``adapters.create_requests`` (same ids, identifiers
  and ``max_tokens=16``).
* vLLM's ``ModelRunnerOutput`` with ``sampled_token_ids`` is not needed: the lab's
  ``update_from_output`` samples one token for every request whose prompt is done, which
  is what ``[[0], [], []]`` says for these requests.
* ``scheduled_new_reqs`` / ``scheduled_cached_reqs.num_reqs``: the lab does not tell new
  from cached requests (every request is running from the start), so these counts become
  the number of requests in ``num_scheduled_tokens``.

Not translated: ``test_no_mm_input_chunking``'s last part (``create_scheduler`` with
``max_num_batched_tokens=100`` and chunking disabled raises ``ValueError``). vLLM checks
that at start-up against the model's largest item; the lab's ``SchedulerConfig`` has no
model and validates nothing.
"""

from __future__ import annotations

import pytest

from synclab.engine.mm_inputs import MultiModalFeatureSpec, PlaceholderRange
from synclab.engine.scheduler import Request, Scheduler, SchedulerConfig
from synclab.list_caches.checks import _SchedulerReference
from tests.upstream.adapters import create_requests, list_cached_range, solution

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

LLAVA_MAX_TOKENS_PER_ITEM = 576  # what vLLM's budgets are raised to for llava-1.5 (encoder_cache_manager.py)
SCHEDULERS = [solution(5, "EncoderScheduler"), _SchedulerReference]


def _config(max_num_batched_tokens: int = 8192, disable_chunked_mm_input: bool = False) -> SchedulerConfig:
    """vLLM's ``create_scheduler`` for llava: the encoder budget and cache follow the token budget."""
    encoder_budget = max(max_num_batched_tokens, LLAVA_MAX_TOKENS_PER_ITEM)
    return SchedulerConfig(max_num_batched_tokens=max_num_batched_tokens,
                           max_num_encoder_input_tokens=encoder_budget, encoder_cache_size=encoder_budget,
                           disable_chunked_mm_input=disable_chunked_mm_input)


def _pos(offset: int, length: int) -> PlaceholderRange:
    """An item's range, unmasked (every placeholder token is an embedding, as in vLLM's test)."""
    return list_cached_range()(offset=offset, length=length)


@pytest.mark.parametrize("scheduler_cls", SCHEDULERS, ids=lambda c: c.__name__)
def test_schedule_multimodal_requests(scheduler_cls: type[Scheduler]) -> None:
    """test_schedule_multimodal_requests: 10 requests of 200 tokens, each with one image, all run whole."""
    requests = create_requests(10, 200, [[_pos(offset=i, length=100)] for i in range(10)])
    scheduler = scheduler_cls(_config(), requests)
    output = scheduler.schedule()
    assert output.num_scheduled_tokens == {r.request_id: 200 for r in requests}
    assert len(output.scheduled_encoder_inputs) == 10
    for encoder_inputs in output.scheduled_encoder_inputs.values():
        assert len(encoder_inputs) == 1


@pytest.mark.parametrize("scheduler_cls", SCHEDULERS, ids=lambda c: c.__name__)
def test_schedule_partial_requests(scheduler_cls: type[Scheduler]) -> None:
    """test_schedule_partial_requests: the encoder budget stops requests just before their image.

    Three 800-token requests, each with an image at positions [100, 700), token budget 1024.
    Step 1: the first takes 800 and 600 of the 1024 encoder budget; the other two cannot fit
    their image and get only their 100 text tokens. Step 2: the first decodes one token, the
    second runs its image (700), the third is left out for the encoder budget.
    """
    requests = create_requests(3, 800, [[_pos(offset=100, length=600)] for _ in range(3)])
    scheduler = scheduler_cls(_config(max_num_batched_tokens=1024), requests)
    assert scheduler.scheduler_config.max_num_encoder_input_tokens == 1024

    output = scheduler.schedule()
    assert output.num_scheduled_tokens == {"0": 800, "1": 100, "2": 100}
    scheduler.update_from_output(output)  # request 0 finished its prompt and sampled a token

    output = scheduler.schedule()
    assert len(scheduler.running) == 3
    assert len(output.num_scheduled_tokens) == 2
    assert output.num_scheduled_tokens["0"] == 1
    assert output.num_scheduled_tokens["1"] == 700
    assert "2" not in output.num_scheduled_tokens


@pytest.mark.parametrize("scheduler_cls", SCHEDULERS, ids=lambda c: c.__name__)
def test_no_mm_input_chunking(scheduler_cls: type[Scheduler]) -> None:
    """test_no_mm_input_chunking: with chunking disabled, step 1 stops before the image, step 2 runs it whole."""
    requests = create_requests(1, 1200, [[_pos(offset=400, length=800)]])
    scheduler = scheduler_cls(_config(max_num_batched_tokens=1024, disable_chunked_mm_input=True), requests)

    output = scheduler.schedule()
    assert output.num_scheduled_tokens == {"0": 400}  # only the 400 text tokens before the image
    scheduler.update_from_output(output)

    output = scheduler.schedule()
    assert len(scheduler.running) == 1
    assert output.num_scheduled_tokens == {"0": 800}
    assert output.scheduled_encoder_inputs == {"0": [0]}


@pytest.mark.parametrize("scheduler_cls", SCHEDULERS, ids=lambda c: c.__name__)
def test_chunk_starting_on_an_item_still_splits_it(scheduler_cls: type[Scheduler]) -> None:
    """Not an upstream test: pins the chunking guard's ``num_computed_tokens < start_pos``.

    vLLM at #40143, and still in Aug 2026, splits an item whose first position is exactly
    the window's start even with chunking disabled (issue #52306, open): the guard only
    rolls back when ``num_computed_tokens < start_pos``. Here request "1" has its 400 text
    tokens computed already (a prefix-cache hit) and request "0" takes 500 of the 1024
    tokens, so the window [400, 924) ends inside the image [400, 1200) and the image is
    split. Open PR #52412 proposes ``<=``, which would schedule nothing for "1" this step;
    the lab follows merged vLLM.
    """
    requests = [Request("0", num_prompt_tokens=500, max_tokens=16),
                Request("1", num_prompt_tokens=1200, max_tokens=16, num_computed_tokens=400,
                        mm_features=[MultiModalFeatureSpec("hash1_0", _pos(offset=400, length=800))])]
    scheduler = scheduler_cls(_config(max_num_batched_tokens=1024, disable_chunked_mm_input=True), requests)
    output = scheduler.schedule()
    assert output.num_scheduled_tokens == {"0": 500, "1": 524}  # #52412 would give {"0": 500}
    assert output.scheduled_encoder_inputs == {"1": [0]}
