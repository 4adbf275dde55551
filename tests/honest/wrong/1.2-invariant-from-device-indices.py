# Checks the invariant against the cursor's device indices (where the sub-group starts and ends): the test itself
# reads them back, one sync per call.
# fails: no-syncs
class AllPoolNoSync(AllPool):
    receives_group_rows = True

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if not sizes:
            return []
        rows = cursor.last_token_indices_gpu[-1] - cursor.first_token_indices_gpu[0] + 1
        if hidden_states.shape[0] != rows or hidden_states.shape[0] != sum(sizes):
            raise ValueError("rows do not match the scheduled tokens")
        return list(hidden_states.split(sizes))
