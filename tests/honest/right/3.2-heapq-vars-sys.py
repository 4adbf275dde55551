# heapq for the widest request, os.getenv/sys.stderr for a debug line, vars(self) and type(self) in it, TINY = 10 ** -12
import heapq
import os
import sys

TINY = 10 ** -12
QUIET = os.getenv("GATHER_QUIET", "0") == "1"


class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        (longest,) = heapq.nlargest(1, map(len, logprob_token_ids.values()))
        batch, width, dev = logits.shape[0], longest + 1, logits.device
        if not QUIET and not getattr(self, "_announced", False):
            self._announced = True
            asked = sum(map(len, logprob_token_ids.values()))
            print(f"{type(self).__name__}{sorted(vars(self))}: {asked / max(batch * longest, TINY):.0%} of the "
                  f"id matrix is requested ids", file=sys.stderr)
        ids_cpu = torch.zeros((batch, width), dtype=torch.long, pin_memory=self.pin_memory)
        lens_cpu = torch.zeros(batch, dtype=torch.long, pin_memory=self.pin_memory)
        for r, ids in logprob_token_ids.items():
            ids_cpu[r, 1:1 + len(ids)] = torch.tensor(ids, dtype=torch.long)
            lens_cpu[r] = len(ids)
        ids_dev = ids_cpu.to(dev, non_blocking=True)
        lens_dev = lens_cpu.to(dev, non_blocking=True)
        ids_dev[:, 0] = sampled
        padded = torch.arange(width, device=dev).unsqueeze(0) > lens_dev.unsqueeze(1)
        logprobs = compute_token_logprobs(logits, ids_dev).masked_fill_(padded, float("-inf"))
        ranks = (logits > logits.gather(1, sampled.unsqueeze(1))).sum(1)
        return LogprobsTensors(ids_dev.to(torch.int32), logprobs, ranks)
