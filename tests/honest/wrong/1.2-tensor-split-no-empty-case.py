# tensor_split at the cumulative offsets, forgetting that no offsets still gives one (empty) piece.
# fails: empty-batch
import itertools


class AllPoolNoSync(AllPool):
    receives_group_rows = True

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if hidden_states.shape[0] != sum(sizes):
            raise ValueError("rows do not match the scheduled tokens")
        return list(hidden_states.tensor_split(list(itertools.accumulate(sizes))[:-1]))
