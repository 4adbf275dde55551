# One read only (the start; the length is the host's sum), narrow() for the slice, getattr with a default.
class AllPool(TokenPoolingMethod):
    """vLLM's token-wise ALL pooling as PR #41163 left it: slice the sub-group once, then split."""

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """This sub-group's rows of ``hidden_states`` [num_tokens, hidden], one view per request, in 2 syncs."""
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        total = sum(sizes)
        if not sizes:
            return []
        # the rows are contiguous and the host knows how many: only the start has to come from the device
        start = cursor.first_token_indices_gpu[0].item()
        return list(torch.split(hidden_states.narrow(0, start, total), sizes))

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        """One item per request: its hidden states once its prompt is complete, else ``None``."""
        cursor = pooling_metadata.get_pooling_cursor()
        pieces = self.split_hidden_states(hidden_states, cursor)
        async_out = getattr(self, "clone_finished", False)
        if not self.enable_chunked_prefill:
            if async_out:
                pieces = [p.clone() for p in pieces]
            return pieces
        results: PoolerOutput = [None] * len(pieces)
        done_flags = cursor.get_finished_mask()
        for i, (piece, state) in enumerate(zip(pieces, pooling_metadata.pooling_states)):
            cache = state.hidden_states_cache
            if not done_flags[i]:
                cache.append(piece.clone())  # the next forward overwrites the buffer
                continue
            if cache:
                results[i] = torch.cat([*cache, piece])  # new storage already
            else:
                results[i] = piece.clone() if async_out else piece
            state.clean()
        return results
