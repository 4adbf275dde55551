# Right in every value, but without chunked prefill it hands back torch.split's tuple: forward's result is a list.
# fails: empty-batch
class AllPool(TokenPoolingMethod):
    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if not sizes:
            return ()
        start = int(cursor.first_token_indices_gpu[0].item())
        end = int(cursor.last_token_indices_gpu[-1].item()) + 1
        return hidden_states[start:end].split(sizes)

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        if not self.enable_chunked_prefill:
            return tuple(c.clone() for c in chunks) if self.clone_finished else chunks
        finished = cursor.get_finished_mask()
        for state, chunk, done in zip(pooling_metadata.pooling_states, chunks, finished):
            owned = (not done) or (self.clone_finished and not state.hidden_states_cache)
            state.hidden_states_cache.append(chunk.clone() if owned else chunk)
        outputs: PoolerOutput = []
        for state, done in zip(pooling_metadata.pooling_states, finished):
            if not done:
                outputs.append(None)
                continue
            cache = state.hidden_states_cache
            outputs.append(cache[0] if len(cache) == 1 else torch.cat(cache, dim=0))
            state.clean()
        return outputs
