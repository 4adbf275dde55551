# A dataclass per step's statistics, a nested helper function, an assert and a print() behind a module-level flag.
from dataclasses import dataclass

VERBOSE = bool(0)


@dataclass
class RepairStats:
    requests: int = 0
    placeholders: int = 0
    replaced: int = 0


class ReverseScanBatch(InputBatch):
    def update_async_output_token_ids(self) -> None:
        """Replace each request's trailing -1 placeholders with the ids sampled last step (in place)."""
        histories = self.sampling_metadata.output_token_ids

        def run_start(ids) -> int:
            """Index of the first placeholder of the trailing run (len(ids) when there is none)."""
            i = len(ids)
            while i and ids[i - 1] == PLACEHOLDER:
                i -= 1
            return i

        if self.sampled_token_ids_cpu is None or not histories:
            return
        stats = RepairStats()
        cpu_rows = None
        for position, req_id in enumerate(self.req_ids):
            prev = self.prev_req_id_to_index.get(req_id)
            ids = histories[position]
            if prev is None or not ids or ids[-1] != PLACEHOLDER:
                continue
            start = run_start(ids)
            assert start < len(ids)
            if cpu_rows is None:
                self.async_copy_ready_event.synchronize()
                cpu_rows = self.sampled_token_ids_cpu.tolist()
            row = cpu_rows[prev]
            valid = row.index(PLACEHOLDER) if row and row[-1] == PLACEHOLDER else len(row)
            in_flight = len(ids) - start
            count = min(valid, in_flight)
            ids[start:] = row[:count]
            stats.requests += 1
            stats.placeholders += in_flight
            stats.replaced += count
        if VERBOSE:
            print(stats)
