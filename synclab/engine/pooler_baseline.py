"""ALL pooling as vLLM had it before PR #41163: what chapter 1's profile runs as its "before".

Taught in chapter 1 (slice-then-split). Kept apart from :mod:`synclab.engine.pooler`, whose pooling
methods and dispatcher the lab sends the reader to. It is the code before the PR in full, so it differs
from Exercise 1.1 in three places: the split (a slice per request), the finished flags
(``is_finished()``), and the clone rule, which came later to vLLM and which it lacks.
"""

from __future__ import annotations

import torch

from synclab.engine.pool_metadata import PoolingCursor, PoolingMetadata
from synclab.engine.pooler import PoolerOutput, TokenPoolingMethod
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


class AllPoolBaseline(TokenPoolingMethod):
    """ALL pooling as vLLM had it before PR #41163: both index tensors read once, then one slice per request.

    Two device reads per call (one ``.tolist()`` of each index tensor), whatever the
    batch size; then one slice per request on host integers. Those N slices are what
    #41163 replaced: each is a torch call the host dispatches (argument parsing, a new
    view), so the host's work grows with the batch even though the syncs do not.

    Its chunk cache keeps **views** of the hidden-states buffer, as vLLM's did then: a
    prompt that spans steps is read back after the next forward has overwritten its
    earlier chunks. Chapter 1's checks catch that (the lab's engine overwrites its
    buffer every step); the clone rule that fixes it is later vLLM's and part of 1.1.
    Nothing that runs a buffer-reusing engine uses this class as it is: the capstone
    pairs its split with a correct ``forward`` (:func:`with_split_before_41163`).
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
            return chunks  # views, returned as they are
        for state, chunk in zip(pooling_metadata.pooling_states, chunks):
            state.hidden_states_cache.append(chunk)  # a view: the next forward may overwrite it
        outputs: PoolerOutput = []
        for state, done in zip(pooling_metadata.pooling_states, cursor.is_finished()):  # host bool tensor
            if done:
                cache = state.hidden_states_cache
                outputs.append(cache[0] if len(cache) == 1 else torch.cat(cache, dim=0))
                state.clean()
            else:
                outputs.append(None)
        return outputs


def with_split_before_41163(all_pool: type[TokenPoolingMethod]) -> type[TokenPoolingMethod]:
    """``all_pool`` with only its split put back as it was before #41163: the capstone's "before chapter 1".

    The capstone's engine reuses its hidden-states buffer and schedules asynchronously, so its "before"
    keeps the forward that clones what must outlive the buffer (the reader's, or the book's) and changes
    only what #41163 changed: one slice per request, from both index tensors read back whole. It is handed
    the whole batch's rows (``receives_group_rows`` False), as the dispatcher did then.
    """
    return type(f"{all_pool.__name__}Before41163", (all_pool,),
                {"split_hidden_states": AllPoolBaseline.split_hidden_states, "receives_group_rows": False})
