# Rebuilds each repaired list by concatenation (outputs[i] = lst[:first] + ids): the request state keeps the old list.
# fails: in-place
class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        outputs = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not outputs:
            return
        rows = None
        for i, req_id in enumerate(self.req_ids):
            prev = self.prev_req_id_to_index.get(req_id)
            lst = outputs[i]
            if prev is None or not lst or lst[-1] != PLACEHOLDER:
                continue
            if rows is None:
                self.async_copy_ready_event.synchronize()
                rows = self.sampled_token_ids_cpu.tolist()
            row = rows[prev]
            valid = row.index(PLACEHOLDER) if PLACEHOLDER in row else len(row)
            first = len(lst)
            while first > 0 and lst[first - 1] == PLACEHOLDER:
                first -= 1
            outputs[i] = lst[:first] + row[:min(valid, len(lst) - first)]
