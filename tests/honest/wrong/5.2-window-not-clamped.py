# The window asked of the item as it is, not clamped to it: a negative start where the window starts inside the
# item, an end past its length where the window runs beyond it. vLLM's list raises or reads from the back.
# fails: fixed-cases
class EncoderScheduler(Scheduler):
    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_compute_budget: int) -> tuple[list[int], int, int]:
        """Which of ``request``'s items must be encoded this step; ``num_new_tokens`` and the budget, adjusted.

        The window is ``[num_computed_tokens, num_computed_tokens + num_new_tokens)``. Returns
        (``encoder_inputs_to_schedule``: item indices, ``num_new_tokens``, ``encoder_compute_budget``).
        """
        if num_new_tokens == 0 or not request.has_encoder_inputs:
            return [], num_new_tokens, encoder_compute_budget
        encoder_inputs_to_schedule: list[int] = []
        mm_hashes_to_schedule: set[str] = set()  # identifiers scheduled this step
        num_embeds_to_schedule = 0
        window_end = num_computed_tokens + num_new_tokens
        for i, mm_feature in enumerate(request.mm_features):
            pos = mm_feature.mm_position
            start_pos, num_encoder_tokens = pos.offset, pos.length
            num_encoder_embeds = pos.get_num_embeds()  # asked of every item, every step: it must be cheap
            if start_pos >= window_end:
                break  # items are sorted by offset: none after this one is needed yet
            if start_pos + num_encoder_tokens <= num_computed_tokens:
                continue  # already computed, its embeddings are in the KV cache
            if mm_feature.identifier in mm_hashes_to_schedule:
                continue  # the same image, already scheduled for this request this step
            if self.encoder_cache_manager.check_and_update_cache(request, i):
                continue  # encoded in an earlier step (or for another request)
            if (self.scheduler_config.disable_chunked_mm_input and num_computed_tokens < start_pos
                    and window_end < start_pos + num_encoder_tokens):
                num_new_tokens = start_pos - num_computed_tokens  # do not split the item: stop before it
                break
            if not self.encoder_cache_manager.can_allocate(request, i, encoder_compute_budget,
                                                           num_embeds_to_schedule):
                # The encoder runs whole items: schedule only the tokens before this one. With a prefix
                # cache hit, num_computed_tokens may already be past its start: then nothing this step.
                num_new_tokens = start_pos - num_computed_tokens if num_computed_tokens < start_pos else 0
                break
            # Does the window hold any of this item's embedding rows? (the window as it is)
            start_idx_rel = num_computed_tokens - start_pos
            end_idx_rel = window_end - start_pos
            embeds_start, embeds_end = pos.get_embeds_indices_in_range(start_idx_rel, end_idx_rel)
            if embeds_end - embeds_start == 0:
                continue
            num_embeds_to_schedule += num_encoder_embeds
            encoder_compute_budget -= num_encoder_embeds  # the whole item, not just the window's part
            mm_hashes_to_schedule.add(mm_feature.identifier)
            encoder_inputs_to_schedule.append(i)
        return encoder_inputs_to_schedule, num_new_tokens, encoder_compute_budget
