# Caches each unfinished chunk as a view of the buffer: the next step's forward overwrites it.
# fails: kept-chunks-survive
class AllPool(TokenPoolingMethod):
    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if not sizes:
            return []
        start = cursor.first_token_indices_gpu[0].item()
        stop = cursor.last_token_indices_gpu[-1].item() + 1
        return list(hidden_states[start:stop].split(sizes))

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        if not self.enable_chunked_prefill:
            return [c.clone() for c in chunks] if self.clone_finished else chunks
        outputs: PoolerOutput = []
        for chunk, done, state in zip(chunks, cursor.get_finished_mask(), pooling_metadata.pooling_states):
            state.hidden_states_cache.append(chunk)
            if not done:
                outputs.append(None)
                continue
            cache = state.hidden_states_cache
            if len(cache) == 1:
                outputs.append(cache[0].clone() if self.clone_finished else cache[0])
            else:
                outputs.append(torch.cat(cache))
            state.clean()
        return outputs
