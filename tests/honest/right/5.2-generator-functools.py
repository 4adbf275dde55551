# A generator yields the items the window reaches; functools.partial binds the cache's questions to the request.
import functools


class EncoderScheduler(Scheduler):
    @staticmethod
    def _reached(features, window_end):
        """(index, feature, its range, its embeddings) for each item up to the window's end, in order of offset."""
        for index, feature in enumerate(features):
            pos = feature.mm_position
            num_embeds = pos.get_num_embeds()  # asked of every item reached, as vLLM does at the PR
            if pos.offset >= window_end:
                return
            yield index, feature, pos, num_embeds

    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_compute_budget: int) -> tuple[list[int], int, int]:
        """Which of ``request``'s items must be encoded this step; ``num_new_tokens`` and the budget, adjusted.

        The window is ``[num_computed_tokens, num_computed_tokens + num_new_tokens)``. Returns
        (``encoder_inputs_to_schedule``: item indices, ``num_new_tokens``, ``encoder_compute_budget``).
        """
        scheduled: list[int] = []
        if num_new_tokens == 0 or not request.has_encoder_inputs:
            return scheduled, num_new_tokens, encoder_compute_budget
        window_end = num_computed_tokens + num_new_tokens
        in_cache = functools.partial(self.encoder_cache_manager.check_and_update_cache, request)
        fits = functools.partial(self.encoder_cache_manager.can_allocate, request)
        seen: set[str] = set()
        pending_embeds = 0
        for index, feature, pos, num_embeds in self._reached(request.mm_features, window_end):
            if pos.offset + pos.length <= num_computed_tokens:
                continue
            if feature.identifier in seen:
                continue
            if in_cache(index):
                continue
            splits = num_computed_tokens < pos.offset and window_end < pos.offset + pos.length
            if self.scheduler_config.disable_chunked_mm_input and splits:
                num_new_tokens = pos.offset - num_computed_tokens
                break
            if not fits(index, encoder_compute_budget, pending_embeds):
                num_new_tokens = max(0, pos.offset - num_computed_tokens)
                break
            lo, hi = pos.get_embeds_indices_in_range(max(0, num_computed_tokens - pos.offset),
                                                     min(pos.length, window_end - pos.offset))
            if lo == hi:
                continue
            seen.add(feature.identifier)
            scheduled.append(index)
            pending_embeds += num_embeds
            encoder_compute_budget -= num_embeds
        return scheduled, num_new_tokens, encoder_compute_budget
