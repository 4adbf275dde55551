# numpy's cumsum for the split points, tensor_split, an explicit empty case, and the invariant checked first.
import numpy as np


class AllPoolNoSync(AllPool):
    """ALL pooling as later vLLM has it: the caller slices the sub-group, the pooler splits by host sizes."""

    receives_group_rows = True  # the dispatcher hands this pooler exactly its sub-group's rows

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """``hidden_states`` holds exactly this sub-group's rows; one view per request, 0 syncs."""
        sizes = cursor.num_scheduled_tokens_cpu.numpy()
        rows, expected = hidden_states.shape[0], int(np.sum(sizes))
        if rows != expected:
            raise ValueError(f"got {rows} rows of hidden states for {expected} scheduled tokens")
        if sizes.size == 0:
            return []
        return list(hidden_states.tensor_split(np.cumsum(sizes)[:-1].tolist()))
