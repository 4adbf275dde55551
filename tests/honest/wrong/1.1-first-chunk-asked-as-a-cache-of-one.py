# Asks whether a chunk is the request's first with len(cache) == 1, before the append: that is the question after it.
# A first chunk is taken for a later one (kept as a view), a second for a first (cloned): values a later forward
# overwrote, and needless copies.
# fails: kept-chunks-survive
class AllPool(TokenPoolingMethod):
    """vLLM's token-wise ALL pooling as the chapter's fix left it: slice the sub-group once, then split."""

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """This sub-group's rows of ``hidden_states`` [num_tokens, hidden], one view per request, in 2 syncs."""
        split_sizes = cursor.num_scheduled_tokens_cpu.tolist()  # host tensor: no sync
        if not split_sizes:
            return []  # no first row to read: and no sync either
        group_start = int(cursor.first_token_indices_gpu[0].item())  # sync 1
        group_end = int(cursor.last_token_indices_gpu[-1].item()) + 1  # sync 2
        group = hidden_states[group_start:group_end]  # [sum(split_sizes), hidden] view: Python bounds, no sync
        return list(group.split(split_sizes))  # [num_scheduled_i, hidden] views

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        """One item per request: its hidden states once its prompt is complete, else ``None``."""
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        if not self.enable_chunked_prefill:  # every request finished, with its only chunk
            return [ch1.kept_chunk(c, finished=True, first_chunk=True, clone_finished=self.clone_finished)
                    for c in chunks]
        finished = cursor.get_finished_mask()  # host list: no sync
        for state, chunk, done in zip(pooling_metadata.pooling_states, chunks, finished):
            first = len(state.hidden_states_cache) == 1  # asked before the append: True after one earlier chunk
            state.hidden_states_cache.append(
                ch1.kept_chunk(chunk, finished=done, first_chunk=first, clone_finished=self.clone_finished))
        outputs: PoolerOutput = []
        for state, done in zip(pooling_metadata.pooling_states, finished):
            if not done:
                outputs.append(None)
                continue
            cache = state.hidden_states_cache
            outputs.append(cache[0] if len(cache) == 1 else torch.cat(cache, dim=0))  # cat: new storage
            state.clean()
        return outputs
