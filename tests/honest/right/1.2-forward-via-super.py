# The 0-sync split plus a forward that logs and hands over to AllPool's own forward with super().
import logging

log = logging.getLogger(__name__)


class AllPoolNoSync(AllPool):
    """ALL pooling as later vLLM has it: the caller slices the sub-group, the pooler splits by host sizes."""

    receives_group_rows = True  # the dispatcher hands this pooler exactly its sub-group's rows

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """``hidden_states`` holds exactly this sub-group's rows; one view per request, 0 syncs."""
        counts = cursor.num_scheduled_tokens_cpu
        total = int(counts.sum())  # a host tensor: no sync
        if hidden_states.size(0) != total:
            raise ValueError(f"expected {total} rows (this sub-group's tokens), got {hidden_states.size(0)}")
        return list(hidden_states.split(counts.tolist()))

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        log.debug("%s: %d rows for %d requests", type(self).__name__, hidden_states.shape[0], len(pooling_metadata))
        return super().forward(hidden_states, pooling_metadata)
