# the pinned id matrix kept on self and refilled each call when the shape repeats: written while still queued
# fails: no-refill-race
class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        shape = (logits.shape[0], 1 + max(len(v) for v in logprob_token_ids.values()))
        if getattr(self, "_shape", None) != shape:
            self._shape = shape
            self._ids = torch.zeros(shape, dtype=torch.int64, pin_memory=self.pin_memory)
            self._mask = torch.zeros(shape, dtype=torch.bool, pin_memory=self.pin_memory)
        self._ids.zero_()
        self._mask.zero_()
        self._mask[:, 0] = True
        for r, ids in logprob_token_ids.items():
            self._ids[r, 1:len(ids) + 1] = torch.tensor(ids, dtype=torch.int64)
            self._mask[r, 1:len(ids) + 1] = True
        ids_dev = self._ids.to(logits.device, non_blocking=True)
        mask_dev = self._mask.to(logits.device, non_blocking=True)
        ids_dev[:, 0] = sampled
        lp = compute_token_logprobs(logits, ids_dev).masked_fill(~mask_dev, float("-inf"))
        ranks = (logits > logits.gather(1, sampled[:, None])).sum(1)
        return LogprobsTensors(ids_dev.int(), lp, ranks)
