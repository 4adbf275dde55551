# Imports sys (sys.maxsize as list.index's stop) and reads the event defensively with getattr.
import sys


class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        sampled = getattr(self, "sampled_token_ids_cpu", None)
        all_ids = self.sampling_metadata.output_token_ids
        if sampled is None or len(all_ids) == 0:
            return
        host_rows = []  # filled on the first request that needs it
        for i in range(len(self.req_ids)):
            ids = all_ids[i]
            row = self.prev_req_id_to_index.get(self.req_ids[i], -1)
            if row < 0 or not ids or ids[-1] != PLACEHOLDER:
                continue
            if not host_rows:
                event = getattr(self, "async_copy_ready_event", None)
                if event is not None:
                    event.synchronize()
                host_rows = sampled.tolist()
            new_ids = host_rows[row]
            try:
                n_valid = new_ids.index(PLACEHOLDER, 0, sys.maxsize)
            except ValueError:
                n_valid = len(new_ids)
            k = 1
            while k < len(ids) and ids[-k - 1] == PLACEHOLDER:
                k += 1
            ids[len(ids) - k:] = new_ids[:min(k, n_valid)]
