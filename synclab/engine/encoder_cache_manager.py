"""The encoder cache's bookkeeping: which items' embeddings are stored, and is there room for more?

Taught in chapter 5 (list-based caches), where the scheduler asks it, per item,
``check_and_update_cache`` (already stored?) and ``can_allocate`` (budget and
space?). Names follow ``vllm/v1/core/encoder_cache_manager.py``; sizes are in
**embeddings** (``get_num_embeds()``), not placeholder tokens.

An item stays cached while a request refers to it. When its last request is done
with it, it becomes *freeable*: still stored, so a later request with the same
image hits it, but evicted (oldest first) when a new item needs the space.

References are per request, as at vLLM #40143: a request carrying the same image
twice holds one reference, and its first ``free_encoder_input`` drops it. Since
vLLM #54284 the entry stays referenced until the request's last occurrence is freed.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from synclab.engine.scheduler import Request


class EncoderCacheManager:
    def __init__(self, cache_size: int) -> None:
        self.cache_size = cache_size
        self.num_free_slots = cache_size  # not holding any item
        self.num_freeable_slots = cache_size  # free, plus held by items no request refers to
        self.cached: dict[str, set[str]] = {}  # identifier -> ids of the requests that refer to it
        self.freeable: OrderedDict[str, int] = OrderedDict()  # identifier -> embeddings, oldest first
        self.freed: list[str] = []  # evicted since the worker last heard (it drops their tensors)

    def check_and_update_cache(self, request: "Request", input_id: int) -> bool:
        """Is item ``input_id``'s output stored? If so, ``request`` now refers to it (it is no longer freeable)."""
        identifier = request.mm_features[input_id].identifier
        if identifier not in self.cached:
            return False
        if not self.cached[identifier]:  # it was freeable: claim it back
            self.num_freeable_slots -= self.freeable.pop(identifier)
        self.cached[identifier].add(request.request_id)
        return True

    def can_allocate(self, request: "Request", input_id: int, encoder_compute_budget: int,
                     num_embeds_to_schedule: int) -> bool:
        """Can item ``input_id`` run this step, after ``num_embeds_to_schedule`` embeddings already scheduled?

        No if it exceeds what is left of the encoder budget, or if the cache cannot
        hold it even after evicting every freeable item. Evicts as few as it needs.
        """
        num_embeds = request.get_num_encoder_embeds(input_id)
        if num_embeds > encoder_compute_budget:
            return False
        num_embeds += num_embeds_to_schedule
        if num_embeds <= self.num_free_slots:
            return True
        if num_embeds > self.num_freeable_slots:
            return False
        while num_embeds > self.num_free_slots:
            identifier, size = self.freeable.popitem(last=False)
            del self.cached[identifier]
            self.freed.append(identifier)
            self.num_free_slots += size
        return True

    def allocate(self, request: "Request", input_id: int) -> None:
        """Reserve space for item ``input_id``, scheduled this step."""
        identifier = request.mm_features[input_id].identifier
        num_embeds = request.get_num_encoder_embeds(input_id)
        self.cached.setdefault(identifier, set()).add(request.request_id)
        self.num_free_slots -= num_embeds
        self.num_freeable_slots -= num_embeds

    def free_encoder_input(self, request: "Request", input_id: int) -> None:
        """``request`` no longer needs item ``input_id``; the last request to let go makes it freeable."""
        identifier = request.mm_features[input_id].identifier
        refs = self.cached.get(identifier)
        if refs is None or request.request_id not in refs:
            return
        refs.discard(request.request_id)
        if not refs:
            num_embeds = request.get_num_encoder_embeds(input_id)
            self.freeable[identifier] = num_embeds
            self.num_freeable_slots += num_embeds

    def get_cached_input_ids(self, request: "Request") -> set[int]:
        return {i for i, f in enumerate(request.mm_features)
                if request.request_id in self.cached.get(f.identifier, ())}
