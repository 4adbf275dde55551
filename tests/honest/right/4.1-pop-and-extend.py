# Pops the trailing placeholders off the end, then extends with the valid ids; a module-level constant by a call.
from collections import deque

NO_ID = int("-1")  # what a placeholder, and a row's padding, look like


class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        if self.sampled_token_ids_cpu is None:
            return
        outputs = self.sampling_metadata.output_token_ids
        if not outputs:
            return
        todo = deque()
        for req_id, ids in zip(self.req_ids, outputs):
            prev = self.prev_req_id_to_index.get(req_id)
            if prev is not None and len(ids) > 0 and ids[-1] == NO_ID:
                todo.append((ids, prev))
        if not todo:
            return
        self.async_copy_ready_event.synchronize()
        sampled = self.sampled_token_ids_cpu.tolist()
        while todo:
            ids, prev = todo.popleft()
            popped = 0
            while ids and ids[-1] == NO_ID:
                ids.pop()
                popped += 1
            valid = []
            for token in sampled[prev]:
                if token == NO_ID or len(valid) == popped:
                    break
                valid.append(token)
            ids.extend(valid)
