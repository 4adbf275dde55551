# numpy for last step's rows: the first -1 of each row found with numpy, the ids still Python ints (.tolist()).
import numpy as np


class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        lists = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or len(lists) == 0:
            return
        needs = []
        for idx, req_id in enumerate(self.req_ids):
            ids = lists[idx]
            if req_id in self.prev_req_id_to_index and len(ids) and ids[-1] == PLACEHOLDER:
                needs.append(idx)
        if not needs:
            return
        self.async_copy_ready_event.synchronize()
        table = self.sampled_token_ids_cpu.numpy()
        padding = table == PLACEHOLDER
        # valid ids per row: up to the first -1, or the whole row when it has none
        n_valid = np.where(padding.any(axis=1), padding.argmax(axis=1), table.shape[1])
        for idx in needs:
            ids = lists[idx]
            prev = self.prev_req_id_to_index[self.req_ids[idx]]
            first = len(ids) - 1
            while first > 0 and ids[first - 1] == PLACEHOLDER:
                first -= 1
            take = min(int(n_valid[prev]), len(ids) - first)
            ids[first:] = table[prev, :take].tolist()
