# A small helper class with __lt__ (repairs ordered by last step's row), collected in a first pass, then applied.
class _Repair:
    """One request whose trailing placeholders need last step's ids: its list, its row, where the run starts."""

    def __init__(self, ids, row, start):
        self.ids, self.row, self.start = ids, row, start

    def __lt__(self, other):
        return self.row < other.row  # read the sampled rows in memory order

    def apply(self, sampled_row):
        valid = len(sampled_row)
        for position, token in enumerate(sampled_row):
            if token == PLACEHOLDER:
                valid = position
                break
        in_flight = len(self.ids) - self.start
        self.ids[self.start:] = sampled_row[:min(valid, in_flight)]


class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        histories = self.sampling_metadata.output_token_ids
        if not histories or self.sampled_token_ids_cpu is None:
            return
        repairs = []
        for req_id, ids in zip(self.req_ids, histories):
            row = self.prev_req_id_to_index.get(req_id)
            if row is None or len(ids) == 0 or ids[-1] != PLACEHOLDER:
                continue
            start = len(ids) - 1
            while start > 0 and ids[start - 1] == PLACEHOLDER:
                start -= 1
            repairs.append(_Repair(ids, row, start))
        if not repairs:
            return  # nothing in flight: no reason to wait for the copy
        self.async_copy_ready_event.synchronize()
        rows = self.sampled_token_ids_cpu.tolist()
        for repair in sorted(repairs):
            repair.apply(rows[repair.row])
