"""``InputBatch.update_async_output_token_ids`` as vLLM had it before PR #42938: chapter 4's "before".

Taught in chapter 4 (reverse placeholder scans), as the "before" of its profile: ``list.index(-1)``
finds the first placeholder by scanning the whole output history, every step. Kept apart from
:mod:`synclab.engine.input_batch`. The page says what it is to Exercise 4.1: the method's structure (which rows, when
to wait); the exercise's work is the scan, and the cases its contract lists.
"""

from __future__ import annotations

from synclab.engine.input_batch import PLACEHOLDER, InputBatch
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


class InputBatchBaseline(InputBatch):
    """Before PR #42938: the first placeholder is found by a forward scan of the whole output."""

    @answer_key("4.1", role="vLLM's code before #42938", scope="checks", name="InputBatchBaseline.update_async_output_token_ids")
    def update_async_output_token_ids(self) -> None:
        output_token_ids = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not output_token_ids:
            return
        sampled_token_ids = None
        for index, req_id in enumerate(self.req_ids):
            prev_index = self.prev_req_id_to_index.get(req_id)
            if prev_index is None:
                continue  # a new request: nothing in flight
            req_output_token_ids = output_token_ids[index]
            if not req_output_token_ids or req_output_token_ids[-1] != PLACEHOLDER:
                continue
            if sampled_token_ids is None:
                self.async_copy_ready_event.synchronize()  # at most once per step
                sampled_token_ids = self.sampled_token_ids_cpu.tolist()
            new_ids: list[int] = sampled_token_ids[prev_index]
            if not new_ids:
                continue
            num_sampled_ids = len(new_ids) if new_ids[-1] != PLACEHOLDER else new_ids.index(PLACEHOLDER)
            first_placeholder = req_output_token_ids.index(PLACEHOLDER)  # O(output length), every step
            num_placeholders = len(req_output_token_ids) - first_placeholder
            num_to_replace = min(num_sampled_ids, num_placeholders)
            del new_ids[num_to_replace:]
            req_output_token_ids[first_placeholder:] = new_ids
