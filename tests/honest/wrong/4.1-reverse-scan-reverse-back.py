# list.reverse() the history in place, scan the placeholders from the front, then reverse back.
# fails: flat-in-length
class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        outputs = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not outputs:
            return
        rows = None
        for req_id, ids in zip(self.req_ids, outputs):
            prev = self.prev_req_id_to_index.get(req_id)
            if prev is None or not ids or ids[-1] != PLACEHOLDER:
                continue
            if rows is None:
                self.async_copy_ready_event.synchronize()
                rows = self.sampled_token_ids_cpu.tolist()
            ids.reverse()  # the trailing run is now at the front (but reversing reads the whole history)
            k = 0
            while k < len(ids) and ids[k] == PLACEHOLDER:
                k += 1
            ids.reverse()
            new = rows[prev]
            valid = new.index(PLACEHOLDER) if PLACEHOLDER in new else len(new)
            ids[len(ids) - k:] = new[:min(valid, k)]
