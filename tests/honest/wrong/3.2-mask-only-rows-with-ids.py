# The mask marks column 0 inside the loop over the requests' ids: a request that asked for none (no entry in the
# dict) has even its sampled token masked as padding.
# fails: fixed-cases
class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        shape = (logits.shape[0], 1 + max(len(v) for v in logprob_token_ids.values()))
        ids_cpu = torch.zeros(shape, dtype=torch.int64, pin_memory=self.pin_memory)
        mask_cpu = torch.zeros(shape, dtype=torch.bool, pin_memory=self.pin_memory)
        for r, ids in logprob_token_ids.items():
            ids_cpu[r, 1:len(ids) + 1] = torch.tensor(ids, dtype=torch.int64)
            mask_cpu[r, :len(ids) + 1] = True  # column 0 with the ids: only for rows in the dict
        ids_dev = ids_cpu.to(logits.device, non_blocking=True)
        mask_dev = mask_cpu.to(logits.device, non_blocking=True)
        ids_dev[:, 0] = sampled
        lp = compute_token_logprobs(logits, ids_dev).masked_fill(~mask_dev, float("-inf"))
        ranks = (logits > logits.gather(1, sampled[:, None])).sum(1)
        return LogprobsTensors(ids_dev.int(), lp, ranks)
