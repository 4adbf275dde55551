# Both bounds in ONE read (torch.stack, then .tolist()), tensor_split at itertools.accumulate offsets, reversed().
import itertools


class AllPool(TokenPoolingMethod):
    """vLLM's token-wise ALL pooling as PR #41163 left it: slice the sub-group once, then split."""

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """This sub-group's rows of ``hidden_states`` [num_tokens, hidden], one view per request, in 2 syncs."""
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if len(sizes) == 0:
            return []
        lo, hi = torch.stack([cursor.first_token_indices_gpu[0], cursor.last_token_indices_gpu[-1]]).tolist()
        offsets = list(itertools.accumulate(sizes))[:-1]  # where each request after the first begins
        return list(hidden_states[lo:hi + 1].tensor_split(offsets))

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        """One item per request: its hidden states once its prompt is complete, else ``None``."""
        cursor = pooling_metadata.get_pooling_cursor()
        views = self.split_hidden_states(hidden_states, cursor)
        chunked, own_outputs = self.enable_chunked_prefill, self.clone_finished
        finished = cursor.get_finished_mask() if chunked else [True] * len(views)
        states = pooling_metadata.pooling_states
        outputs: PoolerOutput = [None] * len(views)
        for i in reversed(range(len(views))):  # each request is independent: any order will do
            view = views[i]
            if not chunked:
                outputs[i] = view.clone() if own_outputs else view
            elif not finished[i]:
                states[i].hidden_states_cache.append(view.clone())
            else:
                kept = states[i].hidden_states_cache
                if kept:
                    outputs[i] = torch.cat(kept + [view])
                else:
                    outputs[i] = view.clone() if own_outputs else view
                states[i].clean()
        return outputs
