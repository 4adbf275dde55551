# Nested helper functions (stop_before, window_holds_embeds) and early returns; the rules read top to bottom.
class EncoderScheduler(Scheduler):
    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_compute_budget: int) -> tuple[list[int], int, int]:
        """Which of ``request``'s items must be encoded this step; ``num_new_tokens`` and the budget, adjusted.

        The window is ``[num_computed_tokens, num_computed_tokens + num_new_tokens)``. Returns
        (``encoder_inputs_to_schedule``: item indices, ``num_new_tokens``, ``encoder_compute_budget``).
        """
        if not num_new_tokens or not request.mm_features:
            return [], num_new_tokens, encoder_compute_budget
        cache = self.encoder_cache_manager
        window_start = num_computed_tokens
        window_end = num_computed_tokens + num_new_tokens

        def stop_before(offset: int) -> int:
            """The window's length when it must end at ``offset`` (0 when it already starts past it)."""
            return max(offset - window_start, 0)

        def window_holds_embeds(pos) -> bool:
            lo = max(0, window_start - pos.offset)
            hi = min(pos.length, window_end - pos.offset)
            first, last = pos.get_embeds_indices_in_range(lo, hi)
            return last > first

        chosen: list[int] = []
        chosen_ids: set[str] = set()
        embeds_chosen = 0
        for i, feature in enumerate(request.mm_features):
            pos = feature.mm_position
            num_embeds = pos.get_num_embeds()
            item_end = pos.offset + pos.length
            if pos.offset >= window_end:
                break
            if item_end <= window_start or feature.identifier in chosen_ids:
                continue
            if cache.check_and_update_cache(request, i):
                continue
            if self.scheduler_config.disable_chunked_mm_input and window_start < pos.offset < window_end < item_end:
                return chosen, stop_before(pos.offset), encoder_compute_budget
            if not cache.can_allocate(request, i, encoder_compute_budget, embeds_chosen):
                return chosen, stop_before(pos.offset), encoder_compute_budget
            if not window_holds_embeds(pos):
                continue
            chosen.append(i)
            chosen_ids.add(feature.identifier)
            embeds_chosen += num_embeds
            encoder_compute_budget -= num_embeds
        return chosen, num_new_tokens, encoder_compute_budget
