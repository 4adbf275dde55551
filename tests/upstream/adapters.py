"""Bridges between the names vLLM's tests use and the lab's objects.

vLLM's tests build their own helpers (``MockRequest``, ``create_requests``) and call a
few manager methods the lab leaves out. Each bridge here says which vLLM name it
stands for. Solution code comes from the solution notebooks, loaded once per session.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from synclab.engine.encoder_cache_manager import EncoderCacheManager
from synclab.engine.mm_inputs import MultiModalFeatureSpec, PlaceholderRange
from synclab.engine.scheduler import Request
from tests.notebook_code import load_function

NOTEBOOKS = {3: "solutions/03_pinned_transfers.ipynb", 4: "solutions/04_reverse_placeholder_scans.ipynb",
             5: "solutions/05_list_based_caches.ipynb"}


@lru_cache(maxsize=None)
def _namespace(chapter: int) -> dict[str, Any]:
    return {}  # one namespace per notebook: its import cells run once, later loads reuse them


@lru_cache(maxsize=None)
def solution(chapter: int, name: str) -> Any:
    """The function or class ``name`` as the chapter's solution notebook defines it (the reader's exercise)."""
    return load_function(NOTEBOOKS[chapter], name, _namespace(chapter))


def list_cached_range() -> type[PlaceholderRange]:
    """Exercise 5.1's ``ListCachedRange``: the lab's ``PlaceholderRange`` as PR #40143 left it."""
    return solution(5, "ListCachedRange")


def mock_request(request_id: str, mm_hashes: list[str], embed_counts: list[int]) -> Request:
    """vLLM's ``MockRequest(request_id, mm_hashes, token_counts)`` of ``test_encoder_cache_manager.py``.

    vLLM's mock answers ``get_num_encoder_embeds(i)`` from ``token_counts``; the lab's
    ``Request`` asks item ``i``'s range, so each item gets an unmasked range of that length.
    """
    range_cls = list_cached_range()
    features = [MultiModalFeatureSpec(h, range_cls(offset=0, length=n)) for h, n in zip(mm_hashes, embed_counts)]
    return Request(request_id, num_prompt_tokens=max(embed_counts, default=0), mm_features=features)


def free_request(manager: EncoderCacheManager, request: Request) -> None:
    """vLLM's ``EncoderCacheManager.free(request)``: drop every reference the request holds.

    The lab's manager has no ``free``; its scheduler frees item by item
    (``Scheduler._free_encoder_inputs``) with the same two calls.
    """
    for input_id in manager.get_cached_input_ids(request):
        manager.free_encoder_input(request, input_id)


def get_freed_mm_hashes(manager: EncoderCacheManager) -> list[str]:
    """vLLM's ``EncoderCacheManager.get_freed_mm_hashes()``: the evicted identifiers, and the list emptied.

    The lab's engine reads and empties ``manager.freed`` itself (``EngineCore.step``).
    """
    freed, manager.freed = manager.freed, []
    return freed


def create_requests(num_requests: int, num_tokens: int, mm_positions: list[list[PlaceholderRange]],
                    max_tokens: int = 16) -> list[Request]:
    """vLLM's ``create_requests`` of ``tests/v1/core/utils.py``, for the lab's ``Request``.

    Same request ids (``"0"``, ``"1"``, ...), same item identifiers (``f"hash{i}_{j}"``: unique,
    so no request hits another's cache entry) and the same default ``max_tokens=16``.
    """
    return [Request(request_id=f"{i}", num_prompt_tokens=num_tokens, max_tokens=max_tokens,
                    mm_features=[MultiModalFeatureSpec(f"hash{i}_{j}", pos) for j, pos in enumerate(mm_positions[i])])
            for i in range(num_requests)]
