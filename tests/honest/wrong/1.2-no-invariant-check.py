# Splits by the host sizes without checking that the rows match them: torch raises its own error, not ValueError.
# fails: mismatched-rows-raise
class AllPoolNoSync(AllPool):
    receives_group_rows = True

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        return list(hidden_states.split(cursor.num_scheduled_tokens_cpu.tolist()))
