# reversed() and itertools: takewhile over the list read backwards counts the trailing run; islice cuts the row.
import itertools
from itertools import islice, takewhile

is_placeholder = lambda token: token == PLACEHOLDER  # a top-level lambda


def trailing_placeholders(ids) -> int:
    return sum(1 for _ in takewhile(is_placeholder, reversed(ids)))


class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        lists = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not lists:
            return
        rows = None
        for req_id, ids in zip(self.req_ids, lists):
            if req_id not in self.prev_req_id_to_index:
                continue
            k = trailing_placeholders(ids)
            if k == 0:
                continue
            if rows is None:
                self.async_copy_ready_event.synchronize()
                rows = self.sampled_token_ids_cpu.tolist()
            row = rows[self.prev_req_id_to_index[req_id]]
            valid = itertools.takewhile(lambda t: t != PLACEHOLDER, row)
            ids[len(ids) - k:] = list(islice(valid, k))
