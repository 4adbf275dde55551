# A dataclass holds the step's plan (items, identifiers, embeddings, budget); a while loop over the item indices.
from dataclasses import dataclass, field


@dataclass
class _Plan:
    budget: int
    items: list = field(default_factory=list)
    identifiers: set = field(default_factory=set)
    embeds: int = 0

    def take(self, index: int, identifier: str, num_embeds: int) -> None:
        self.items.append(index)
        self.identifiers.add(identifier)
        self.embeds += num_embeds
        self.budget -= num_embeds


class EncoderScheduler(Scheduler):
    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_compute_budget: int) -> tuple[list[int], int, int]:
        """Which of ``request``'s items must be encoded this step; ``num_new_tokens`` and the budget, adjusted.

        The window is ``[num_computed_tokens, num_computed_tokens + num_new_tokens)``. Returns
        (``encoder_inputs_to_schedule``: item indices, ``num_new_tokens``, ``encoder_compute_budget``).
        """
        plan = _Plan(encoder_compute_budget)
        if num_new_tokens == 0 or not request.has_encoder_inputs:
            return plan.items, num_new_tokens, plan.budget
        end = num_computed_tokens + num_new_tokens
        no_split = self.scheduler_config.disable_chunked_mm_input
        manager = self.encoder_cache_manager
        i = 0
        while i < len(request.mm_features):
            feature = request.mm_features[i]
            pos = feature.mm_position
            embeds = pos.get_num_embeds()
            if pos.offset >= end:
                break
            done = pos.offset + pos.length <= num_computed_tokens
            if not done and feature.identifier not in plan.identifiers \
                    and not manager.check_and_update_cache(request, i):
                if no_split and num_computed_tokens < pos.offset and end < pos.offset + pos.length:
                    num_new_tokens = pos.offset - num_computed_tokens
                    break
                if not manager.can_allocate(request, i, plan.budget, plan.embeds):
                    num_new_tokens = pos.offset - num_computed_tokens if pos.offset > num_computed_tokens else 0
                    break
                start_rel = max(0, num_computed_tokens - pos.offset)
                end_rel = min(pos.length, end - pos.offset)
                rows = pos.get_embeds_indices_in_range(start_rel, end_rel)
                if rows[1] - rows[0] > 0:
                    plan.take(i, feature.identifier, embeds)
            i += 1
        return plan.items, num_new_tokens, plan.budget
