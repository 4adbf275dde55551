# sorted(key=...) over the items by offset (an alias computed by operator.attrgetter), and a for/else-free loop.
import operator

by_offset = operator.attrgetter("mm_position.offset")


class EncoderScheduler(Scheduler):
    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_compute_budget: int) -> tuple[list[int], int, int]:
        """Which of ``request``'s items must be encoded this step; ``num_new_tokens`` and the budget, adjusted.

        The window is ``[num_computed_tokens, num_computed_tokens + num_new_tokens)``. Returns
        (``encoder_inputs_to_schedule``: item indices, ``num_new_tokens``, ``encoder_compute_budget``).
        """
        if num_new_tokens <= 0 or len(request.mm_features) == 0:
            return [], num_new_tokens, encoder_compute_budget
        window_end = num_computed_tokens + num_new_tokens
        to_encode, identifiers, embeds_so_far = [], set(), 0
        ordered = sorted(enumerate(request.mm_features), key=lambda pair: by_offset(pair[1]))
        for index, feature in ordered:
            pos = feature.mm_position
            cost = pos.get_num_embeds()
            first, past = pos.offset, pos.offset + pos.length
            if first >= window_end:
                break
            if past <= num_computed_tokens:
                continue
            if feature.identifier in identifiers:
                continue
            if self.encoder_cache_manager.check_and_update_cache(request, index):
                continue
            would_split = num_computed_tokens < first and window_end < past
            if would_split and self.scheduler_config.disable_chunked_mm_input:
                num_new_tokens = first - num_computed_tokens
                break
            if not self.encoder_cache_manager.can_allocate(request, index, encoder_compute_budget, embeds_so_far):
                num_new_tokens = first - num_computed_tokens if first > num_computed_tokens else 0
                break
            rel_start = max(num_computed_tokens - first, 0)
            rel_end = min(window_end - first, pos.length)
            embeds_from, embeds_to = pos.get_embeds_indices_in_range(rel_start, rel_end)
            if embeds_from == embeds_to:
                continue
            to_encode.append(index)
            identifiers.add(feature.identifier)
            embeds_so_far += cost
            encoder_compute_budget -= cost
        return sorted(to_encode), num_new_tokens, encoder_compute_budget
