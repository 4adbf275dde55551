# Reads the start once, then cuts one slice per request at itertools.accumulate offsets: host work grows with N.
# fails: flat-host-work
import itertools


class AllPool(TokenPoolingMethod):
    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if not sizes:
            return []
        start = int(cursor.first_token_indices_gpu[0].item())
        ends = [start + e for e in itertools.accumulate(sizes)]
        starts = [start] + ends[:-1]
        return [hidden_states[s:e] for s, e in zip(starts, ends)]

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        if not self.enable_chunked_prefill:
            return [c.clone() for c in chunks] if self.clone_finished else chunks
        outputs: PoolerOutput = []
        for chunk, done, state in zip(chunks, cursor.get_finished_mask(), pooling_metadata.pooling_states):
            cache = state.hidden_states_cache
            if not done:
                cache.append(chunk.clone())
                outputs.append(None)
                continue
            outputs.append(torch.cat(cache + [chunk]) if cache else (chunk.clone() if self.clone_finished else chunk))
            state.clean()
        return outputs
