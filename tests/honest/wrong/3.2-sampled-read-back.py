# builds the whole matrix on the host, column 0 included: reads `sampled` back with .tolist() (one sync per call)
# fails: no-syncs
class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        width = 1 + max(len(v) for v in logprob_token_ids.values())
        first = sampled.tolist()
        rows, mask = [], []
        for r, s in enumerate(first):
            ids = logprob_token_ids.get(r, [])
            rows.append([s] + ids + [0] * (width - 1 - len(ids)))
            mask.append([True] * (1 + len(ids)) + [False] * (width - 1 - len(ids)))
        ids_dev = torch.tensor(rows, pin_memory=self.pin_memory).to(logits.device, non_blocking=True)
        mask_dev = torch.tensor(mask, pin_memory=self.pin_memory).to(logits.device, non_blocking=True)
        lp = compute_token_logprobs(logits, ids_dev).masked_fill(~mask_dev, float("-inf"))
        ranks = (logits > logits.gather(1, sampled[:, None])).sum(1)
        return LogprobsTensors(ids_dev.int(), lp, ranks)
