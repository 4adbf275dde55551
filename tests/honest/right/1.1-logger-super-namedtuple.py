# A module-level logger, __init__ calling super(), a namedtuple for the bounds, int() of each bound.
import logging
from collections import namedtuple

logger = logging.getLogger("allpool")
Bounds = namedtuple("Bounds", "start stop")


class AllPool(TokenPoolingMethod):
    """vLLM's token-wise ALL pooling as PR #41163 left it: slice the sub-group once, then split."""

    def __init__(self, enable_chunked_prefill: bool = True, async_scheduling: bool = False) -> None:
        super().__init__(enable_chunked_prefill=enable_chunked_prefill, async_scheduling=async_scheduling)
        logger.debug("AllPool(chunked=%s, async=%s)", enable_chunked_prefill, async_scheduling)

    @staticmethod
    def _bounds(cursor: PoolingCursor) -> Bounds:
        # two syncs, one int64 each; the last index is inclusive
        return Bounds(int(cursor.first_token_indices_gpu[0]), int(cursor.last_token_indices_gpu[-1]) + 1)

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """This sub-group's rows of ``hidden_states`` [num_tokens, hidden], one view per request, in 2 syncs."""
        if len(cursor) == 0:
            return []
        bounds = self._bounds(cursor)
        group = hidden_states[bounds.start:bounds.stop]
        return list(group.split(cursor.num_scheduled_tokens_cpu.tolist(), dim=0))

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        """One item per request: its hidden states once its prompt is complete, else ``None``."""
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        if not self.enable_chunked_prefill:
            return list(map(torch.clone, chunks)) if self.clone_finished else chunks
        out: PoolerOutput = []
        for chunk, finished, state in zip(chunks, cursor.is_finished().tolist(), pooling_metadata.pooling_states):
            earlier = state.hidden_states_cache
            if not finished:
                earlier.append(chunk.clone())
                out.append(None)
            elif len(earlier) == 0:
                out.append(chunk.clone() if self.clone_finished else chunk)
            else:
                out.append(torch.cat(earlier + [chunk], dim=0))
                state.clean()
        logger.debug("pooled %d requests, %d finished", len(out), sum(o is not None for o in out))
        return out
