# Skips an item with no embedding row in the window before asking whether it fits: an item that does not fit, whose
# leading tokens the window holds, lets the window run past its start (a learner's answer).
# fails: fixed-cases
class EncoderScheduler(Scheduler):
    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_compute_budget: int) -> tuple[list[int], int, int]:
        """Which of ``request``'s items must be encoded this step; ``num_new_tokens`` and the budget, adjusted."""
        if num_new_tokens == 0 or not request.has_encoder_inputs:
            return [], num_new_tokens, encoder_compute_budget
        end = num_computed_tokens + num_new_tokens
        chosen, seen, embeds_chosen = [], set(), 0
        manager = self.encoder_cache_manager
        for i, feature in enumerate(request.mm_features):
            pos = feature.mm_position
            n = pos.get_num_embeds()
            if pos.offset >= end:
                break
            if pos.offset + pos.length <= num_computed_tokens or feature.identifier in seen:
                continue
            if manager.check_and_update_cache(request, i):
                continue
            if (self.scheduler_config.disable_chunked_mm_input and num_computed_tokens < pos.offset
                    and end < pos.offset + pos.length):
                num_new_tokens = pos.offset - num_computed_tokens
                break
            lo, hi = pos.get_embeds_indices_in_range(max(0, num_computed_tokens - pos.offset),
                                                     min(pos.length, end - pos.offset))
            if hi == lo:  # rule g, asked too early
                continue
            if not manager.can_allocate(request, i, encoder_compute_budget, embeds_chosen):
                num_new_tokens = max(pos.offset - num_computed_tokens, 0)
                break
            chosen.append(i)
            seen.add(feature.identifier)
            embeds_chosen += n
            encoder_compute_budget -= n
        return chosen, num_new_tokens, encoder_compute_budget
