# A generator of outputs, small helper methods, __repr__ with type(self) and vars(), a debug print via os.getenv.
import os

VERBOSE = bool(os.getenv("ALLPOOL_VERBOSE"))


class AllPool(TokenPoolingMethod):
    """vLLM's token-wise ALL pooling as PR #41163 left it: slice the sub-group once, then split."""

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v}" for k, v in sorted(vars(self).items()))
        return f"{type(self).__name__}({settings})"

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """This sub-group's rows of ``hidden_states`` [num_tokens, hidden], one view per request, in 2 syncs."""
        n = len(cursor.num_scheduled_tokens_cpu)
        if n == 0:
            return []
        first = cursor.first_token_indices_gpu[:1].tolist()[0]
        last = cursor.last_token_indices_gpu[n - 1:].tolist()[0]
        if VERBOSE:
            print(f"{self!r}: rows {first}..{last} for {n} requests")
        return [*hidden_states[first:last + 1].split(cursor.num_scheduled_tokens_cpu.tolist())]

    def _keep(self, chunk: torch.Tensor) -> torch.Tensor:
        return chunk.clone()  # kept across steps: must not alias the buffer

    def _finish(self, chunk: torch.Tensor, earlier: list[torch.Tensor]) -> torch.Tensor:
        if earlier:
            return torch.cat((*earlier, chunk))
        return self._keep(chunk) if self.clone_finished else chunk

    def _items(self, chunks, pooling_metadata):
        if not self.enable_chunked_prefill:
            for chunk in chunks:
                yield self._finish(chunk, [])
            return
        mask = pooling_metadata.get_pooling_cursor().get_finished_mask()
        for chunk, done, state in zip(chunks, mask, pooling_metadata.pooling_states):
            if done:
                yield self._finish(chunk, state.hidden_states_cache)
                state.clean()
            else:
                state.hidden_states_cache.append(self._keep(chunk))
                yield None

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        """One item per request: its hidden states once its prompt is complete, else ``None``."""
        chunks = self.split_hidden_states(hidden_states, pooling_metadata.get_pooling_cursor())
        return list(self._items(chunks, pooling_metadata))
