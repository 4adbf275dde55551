"""The encoder cache's bookkeeping, translated from vLLM's ``tests/v1/core/test_encoder_cache_manager.py``.

Cases as they stand at vLLM PR #40143: the ``(request, input_id)`` API, sizes in embeddings
(``get_num_encoder_embeds``, since #30475), ``can_allocate(..., num_embeds_to_schedule)``.
The class under test is the lab's ``synclab/engine/encoder_cache_manager.py``.

Adapted (see ``adapters.py``): vLLM's ``MockRequest`` becomes a lab ``Request`` whose items
have unmasked ranges of the given sizes; vLLM's ``manager.free(req)`` and
``manager.get_freed_mm_hashes()``, which the lab's manager leaves to its scheduler and
engine, become ``free_request`` and ``get_freed_mm_hashes`` built from the same calls.
The second half of ``test_get_freed_mm_hashes_clears_freed_list`` (a second call returns
``[]``) would only test that adapter, so it is not translated.

Not translated: the ``reset()`` tests (the lab has no model-weight updates, hence no
``reset``), the encoder-decoder cache manager tests (the lab has no encoder-decoder
models), and ``test_encoder_cache_mask_based_retrieval``'s sums over the raw mask (they
test torch, not the manager; its ``get_num_embeds() == 5`` is kept).

One divergence on purpose: a request that holds the same item twice (see the last test).
"""

from __future__ import annotations

import torch

from synclab.engine.encoder_cache_manager import EncoderCacheManager
from synclab.engine.mm_inputs import MultiModalFeatureSpec
from tests.upstream.adapters import free_request, get_freed_mm_hashes, list_cached_range, mock_request
import pytest

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

BIG = int(1e9)  # vLLM's "no compute budget limit"


def test_basic_allocate_and_reuse() -> None:
    """test_basic_allocate_and_reuse: a hit after allocation; two frees leave it freeable, still stored."""
    cache = EncoderCacheManager(cache_size=10)
    req = mock_request("r1", ["imgA"], [4])
    assert not cache.check_and_update_cache(req, 0)
    assert cache.can_allocate(req, 0, BIG, 0)
    cache.allocate(req, 0)
    assert cache.check_and_update_cache(req, 0)
    assert "r1" in cache.cached["imgA"]
    assert cache.num_free_slots == 6
    cache.free_encoder_input(req, 0)
    cache.free_encoder_input(req, 0)  # the second free is a no-op
    assert not cache.cached["imgA"]
    assert "imgA" in cache.freeable
    assert cache.num_freeable_slots == 10
    assert cache.num_free_slots == 6


def test_freeing_decreases_refcount_and_moves_to_freeable() -> None:
    """test_freeing_decreases_refcount_and_moves_to_freeable."""
    manager = EncoderCacheManager(cache_size=10)
    req = mock_request("req2", ["img3"], [5])
    assert manager.can_allocate(req, 0, BIG, 0)
    manager.allocate(req, 0)
    assert len(manager.cached["img3"]) == 1
    manager.free_encoder_input(req, 0)
    assert not manager.cached["img3"]
    assert "img3" in manager.freeable
    assert manager.num_freeable_slots == 10


def test_free_request_frees_all_inputs() -> None:
    """test_free_request_frees_all_inputs (``manager.free(req)`` through the adapter)."""
    manager = EncoderCacheManager(cache_size=10)
    req = mock_request("req3", ["a", "b"], [2, 3])
    for input_id in (0, 1):
        assert manager.can_allocate(req, input_id, BIG, 0)
        manager.allocate(req, input_id)
    assert len(manager.cached["a"]) == 1 and len(manager.cached["b"]) == 1
    free_request(manager, req)
    assert not manager.cached["a"] and not manager.cached["b"]
    assert "a" in manager.freeable and "b" in manager.freeable
    assert manager.num_freeable_slots == 10


def test_eviction_when_cache_is_full() -> None:
    """test_eviction_when_cache_is_full: a freeable entry is evicted to make room, and reported."""
    manager = EncoderCacheManager(cache_size=10)
    req1, req2 = mock_request("req1", ["x"], [6]), mock_request("req2", ["y"], [5])
    assert manager.can_allocate(req1, 0, BIG, 0)
    manager.allocate(req1, 0)
    manager.free_encoder_input(req1, 0)
    assert manager.can_allocate(req2, 0, BIG, 0)
    manager.allocate(req2, 0)
    assert "x" not in manager.cached
    assert "x" in get_freed_mm_hashes(manager)


def test_get_cached_input_ids() -> None:
    """test_get_cached_input_ids."""
    manager = EncoderCacheManager(cache_size=10)
    req = mock_request("reqX", ["m", "n", "o"], [2, 4, 3])
    for input_id in (0, 2):
        assert manager.can_allocate(req, input_id, BIG, 0)
        manager.allocate(req, input_id)
    assert manager.get_cached_input_ids(req) == {0, 2}


def test_has_cache_restores_from_freeable() -> None:
    """test_has_cache_restores_from_freeable: a hit on a freeable entry claims it back."""
    manager = EncoderCacheManager(cache_size=10)
    req = mock_request("reqY", ["imgZ"], [4])
    assert manager.can_allocate(req, 0, BIG, 0)
    manager.allocate(req, 0)
    manager.free_encoder_input(req, 0)
    assert manager.check_and_update_cache(req, 0)
    assert len(manager.cached["imgZ"]) == 1
    assert "imgZ" not in manager.freeable
    assert manager.num_freeable_slots == 6


def test_get_freed_mm_hashes_clears_freed_list() -> None:
    """test_get_freed_mm_hashes_clears_freed_list, first half: the evicted entry is reported once."""
    manager = EncoderCacheManager(cache_size=10)
    req1, req2 = mock_request("reqA", ["a"], [5]), mock_request("reqB", ["b"], [6])
    assert manager.can_allocate(req1, 0, BIG, 0)
    manager.allocate(req1, 0)
    manager.free_encoder_input(req1, 0)
    assert manager.can_allocate(req2, 0, BIG, 0)  # evicts "a"
    manager.allocate(req2, 0)
    assert get_freed_mm_hashes(manager) == ["a"]


def test_schedule_request_multi_images_respect_space_limit() -> None:
    """test_schedule_request_multi_images_respect_space_limit: what is already scheduled counts against space."""
    manager = EncoderCacheManager(cache_size=10)
    req = mock_request("reqA", ["a", "b"], [5, 6])
    compute_budget, num_embeds_to_schedule = 100, 0
    assert manager.can_allocate(req, 0, compute_budget, num_embeds_to_schedule)
    num_embeds_to_schedule += req.get_num_encoder_embeds(0)
    compute_budget -= req.get_num_encoder_embeds(0)
    assert not manager.can_allocate(req, 1, compute_budget, num_embeds_to_schedule)


def test_schedule_request_multi_images_respect_compute_limit() -> None:
    """test_schedule_request_multi_images_respect_compute_limit: 6 embeddings do not fit a budget of 5 left."""
    manager = EncoderCacheManager(cache_size=100)
    req = mock_request("reqA", ["a", "b"], [5, 6])
    compute_budget, num_embeds_to_schedule = 10, 0
    assert manager.can_allocate(req, 0, compute_budget, num_embeds_to_schedule)
    num_embeds_to_schedule += req.get_num_encoder_embeds(0)
    compute_budget -= req.get_num_encoder_embeds(0)
    assert not manager.can_allocate(req, 1, compute_budget, num_embeds_to_schedule)


def _masked_request(request_id: str, identifier: str, is_embed: torch.Tensor):
    request = mock_request(request_id, [identifier], [len(is_embed)])
    range_cls = list_cached_range()
    request.mm_features[0] = MultiModalFeatureSpec(identifier, range_cls(0, len(is_embed), is_embed))
    return request


def test_encoder_cache_with_is_embed_mask() -> None:
    """test_encoder_cache_with_is_embed_mask: 100 placeholder tokens, 8 embeddings, 8 slots taken."""
    is_embed = torch.zeros(100, dtype=torch.bool)
    is_embed[torch.tensor([5, 15, 25, 35, 45, 55, 65, 75])] = True
    request = _masked_request("r1", "img1", is_embed)
    manager = EncoderCacheManager(cache_size=100)
    manager.allocate(request, 0)
    assert manager.num_free_slots == 92
    assert "img1" in manager.cached
    assert request.mm_features[0].mm_position.get_num_embeds() == 8


def test_encoder_cache_mask_based_retrieval() -> None:
    """test_encoder_cache_mask_based_retrieval: 5 embeddings in 10 tokens (the slot count is added here)."""
    is_embed = torch.tensor([False, False, True, True, False, True, True, True, False, False])
    request = _masked_request("r1", "img1", is_embed)
    manager = EncoderCacheManager(cache_size=50)
    manager.allocate(request, 0)
    assert request.mm_features[0].mm_position.get_num_embeds() == 5
    assert manager.num_free_slots == 45


def test_same_item_twice_is_released_at_its_first_free() -> None:
    """The lab keeps vLLM's behaviour at #40143 ON PURPOSE: one reference per request.

    A request carrying the same image twice holds one reference to it, so freeing the
    first occurrence makes the entry freeable (and evictable) while the second still needs
    it. vLLM changed this in #54284 (merged, Aug 2026): the entry now stays referenced
    until the request's last occurrence is freed, so in current vLLM the two asserts
    marked ``#54284`` below would read the opposite way.
    """
    manager = EncoderCacheManager(cache_size=10)
    req = mock_request("r1", ["imgA", "imgA"], [4, 4])
    assert manager.can_allocate(req, 0, BIG, 0)
    manager.allocate(req, 0)
    assert manager.check_and_update_cache(req, 1)  # the second occurrence hits the first's entry
    assert manager.cached["imgA"] == {"r1"}

    manager.free_encoder_input(req, 0)  # the first occurrence is done
    assert "imgA" in manager.freeable  # #54284: still referenced, not freeable
    assert manager.num_freeable_slots == 10

    other = mock_request("r2", ["imgB"], [10])
    assert manager.can_allocate(other, 0, BIG, 0)  # #54284: False, imgA is still needed
    assert "imgA" not in manager.cached and get_freed_mm_hashes(manager) == ["imgA"]
