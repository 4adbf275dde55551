# The code before the PR, as a learner first writes it: ids.index(-1) finds the first placeholder from the start.
# fails: fixed-cases
class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        outputs = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not outputs:
            return
        self.async_copy_ready_event.synchronize()
        rows = self.sampled_token_ids_cpu.tolist()
        for req_id, ids in zip(self.req_ids, outputs):
            prev = self.prev_req_id_to_index.get(req_id)
            if prev is None or PLACEHOLDER not in ids:
                continue
            start = ids.index(PLACEHOLDER)
            new = [t for t in rows[prev] if t != PLACEHOLDER]
            ids[start:] = new[:len(ids) - start]
