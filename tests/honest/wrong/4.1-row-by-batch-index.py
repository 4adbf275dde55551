# Takes each request's sampled ids from the row at its index in this step's batch, not from its row last step
# (prev_req_id_to_index): right only while the two orders agree.
# fails: fixed-cases
class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
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
                continue  # no trailing placeholder (e.g. trimmed after a failed KV load)
            if sampled_token_ids is None:
                self.async_copy_ready_event.synchronize()  # the first request that needs them: once per step
                sampled_token_ids = self.sampled_token_ids_cpu.tolist()
            new_ids: list[int] = sampled_token_ids[index]  # this step's index, not last step's row
            if not new_ids:
                continue
            # Speculative rows are right-padded with -1: the valid ids stop at the first one.
            num_sampled_ids = len(new_ids) if new_ids[-1] != PLACEHOLDER else new_ids.index(PLACEHOLDER)
            # Placeholders are always a suffix: walk back over them only, O(placeholders), not O(output).
            first_placeholder = len(req_output_token_ids)
            while first_placeholder > 0 and req_output_token_ids[first_placeholder - 1] == PLACEHOLDER:
                first_placeholder -= 1
            num_to_replace = min(num_sampled_ids, len(req_output_token_ids) - first_placeholder)
            del new_ids[num_to_replace:]
            req_output_token_ids[first_placeholder:] = new_ids  # in place: the request state sees it; may shrink