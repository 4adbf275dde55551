# A module-level logger and a constant computed by a call, as vLLM's own modules have them.
import logging

logger = logging.getLogger(__name__)
PLACEHOLDER_ID = int("-1")


class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        outputs = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not outputs:
            return
        rows = None
        for index, req_id in enumerate(self.req_ids):
            prev = self.prev_req_id_to_index.get(req_id)
            if prev is None:
                continue
            out = outputs[index]
            if not out or out[-1] != PLACEHOLDER_ID:
                continue
            if rows is None:
                self.async_copy_ready_event.synchronize()
                rows = self.sampled_token_ids_cpu.tolist()
            new = rows[prev]
            valid = new.index(PLACEHOLDER_ID) if PLACEHOLDER_ID in new else len(new)
            start = len(out)
            while start > 0 and out[start - 1] == PLACEHOLDER_ID:
                start -= 1
            n = min(valid, len(out) - start)
            logger.debug("request %s: %d placeholders, %d replaced", req_id, len(out) - start, n)
            out[start:] = new[:n]
