# os.getenv for a module-level debug switch with a logging logger, and heapq to apply the repairs in row order.
import heapq
import logging
import os

log = logging.getLogger("reverse_scan")
DEBUG_REPAIR = os.getenv("REPAIR_DEBUG", "0") == "1"


class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        output_lists = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not output_lists:
            return
        heap = []
        for batch_index, req_id in enumerate(self.req_ids):
            ids = output_lists[batch_index]
            row = self.prev_req_id_to_index.get(req_id)
            if row is not None and ids and ids[-1] == PLACEHOLDER:
                heapq.heappush(heap, (row, batch_index))
        if not heap:
            return
        self.async_copy_ready_event.synchronize()
        sampled_rows = self.sampled_token_ids_cpu.tolist()
        while heap:
            row, batch_index = heapq.heappop(heap)
            ids = output_lists[batch_index]
            cut = len(ids)
            while cut > 0 and ids[cut - 1] == PLACEHOLDER:
                cut -= 1
            new_ids = sampled_rows[row]
            valid = next((i for i, t in enumerate(new_ids) if t == PLACEHOLDER), len(new_ids))
            ids[cut:] = new_ids[:min(valid, len(ids) - cut)]
            if DEBUG_REPAIR:
                log.debug("row %d -> request %d: %d ids", row, batch_index, min(valid, len(ids) - cut))
