"""ALL pooling as vLLM had it before PR #41163: what chapter 1's profile and the capstone's switch run.

Taught in chapter 1 (slice-then-split), as the "before" of its profile: kept apart from
:mod:`synclab.engine.pooler`, whose pooling methods and dispatcher the lab sends the reader to,
so that Exercise 1.1 is written from its contract, not edited from this.
"""

from __future__ import annotations

import torch

from synclab.engine.pool_metadata import PoolingCursor, PoolingMetadata
from synclab.engine.pooler import PoolerOutput, TokenPoolingMethod
from synclab.answer_keys import answer_key


class AllPoolBaseline(TokenPoolingMethod):
    """ALL pooling as vLLM had it before PR #41163: both index tensors read once, then one slice per request.

    Two device reads per call (one ``.tolist()`` of each index tensor), whatever the
    batch size; then one slice per request on host integers. Those N slices are what
    #41163 replaced: each is a torch call the host dispatches (argument parsing, a new
    view), so the host's work grows with the batch even though the syncs do not. The
    finished flags come from ``is_finished()``, a host bool tensor, as at #41163.

    One rule is later vLLM's, not the code's before #41163, which kept and returned
    views: the clones of chunks that must outlive the hidden-states buffer. The lab's
    engine overwrites that buffer every step, so without them the baseline would be
    wrong, not just slow (chapter 1's page says so).
    """

    @answer_key("1.1", "1.2", role="vLLM's code before #41163", scope="checks", name="AllPoolBaseline.split_hidden_states")
    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        first = cursor.first_token_indices_gpu.tolist()  # sync 1: the whole index tensor comes back
        last = cursor.last_token_indices_gpu.tolist()  # sync 2
        return [hidden_states[f:l + 1] for f, l in zip(first, last)]  # one slice per request: [n_i, hidden] views

    @answer_key("1.1", "1.2", role="vLLM's code before #41163", scope="checks", name="AllPoolBaseline.forward")
    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        if not self.enable_chunked_prefill:
            return [c.clone() for c in chunks] if self.clone_finished else chunks
        finished = cursor.is_finished()  # [num_reqs] bool, host: no sync
        for state, chunk, done in zip(pooling_metadata.pooling_states, chunks, finished):
            # a kept chunk must outlive the hidden-states buffer, which the next step overwrites
            owned = (not done) or (self.clone_finished and not state.hidden_states_cache)
            state.hidden_states_cache.append(chunk.clone() if owned else chunk)
        outputs: PoolerOutput = []
        for state, done in zip(pooling_metadata.pooling_states, finished):
            if not done:
                outputs.append(None)
                continue
            cache = state.hidden_states_cache
            outputs.append(cache[0] if len(cache) == 1 else torch.cat(cache, dim=0))  # cat: new storage
            state.clean()
        return outputs
