# one flat upload of every requested id with its (row, column), index_put_ of device values on the device; statistics
import math
import statistics


class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        batch, dev = logits.shape[0], logits.device
        width = 1 + max(len(v) for v in logprob_token_ids.values())
        rows, cols, vals = [], [], []
        for r, wanted in sorted(logprob_token_ids.items()):
            rows += [r] * len(wanted)
            cols += range(1, len(wanted) + 1)
            vals += wanted
        if rows:
            print(f"{len(rows)} requested ids over {len(logprob_token_ids)} requests, "
                  f"{statistics.mean(len(v) for v in logprob_token_ids.values()):.1f} per request")
        # one host table [3, n]: rows, columns, ids; pinned where the platform allows, sent once
        table = torch.tensor([rows, cols, vals], dtype=torch.int64, pin_memory=self.pin_memory).to(dev, non_blocking=True)
        ids = torch.zeros(batch, width, dtype=torch.int64, device=dev)
        valid = torch.zeros(batch, width, dtype=torch.bool, device=dev)
        ids[:, 0] = sampled
        valid[:, 0] = True
        ids.index_put_((table[0], table[1]), table[2])  # device indices, device values: a kernel
        valid.index_put_((table[0], table[1]), torch.ones_like(table[2], dtype=torch.bool))
        logprobs = compute_token_logprobs(logits, ids)
        logprobs = torch.where(valid, logprobs, torch.full_like(logprobs, -math.inf))
        ranks = torch.sum(logits > logits.gather(1, sampled[:, None]), dim=1)
        return LogprobsTensors(ids.int(), logprobs, ranks)
