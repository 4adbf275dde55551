# Fills new pinned buffers a few columns wider than needed and uploads the needed columns: a view of pinned memory
# with gaps uploads through a pageable temporary torch makes, a staging copy per upload.
# fails: no-syncs
class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        width = 1 + max(len(v) for v in logprob_token_ids.values())
        ids = torch.zeros(logits.shape[0], width + 8, dtype=torch.int64, pin_memory=self.pin_memory)
        mask = torch.zeros(logits.shape[0], width + 8, dtype=torch.bool, pin_memory=self.pin_memory)
        mask[:, 0] = True
        for r, wanted in logprob_token_ids.items():
            ids[r, 1:len(wanted) + 1] = torch.as_tensor(wanted, dtype=torch.int64)
            mask[r, 1:len(wanted) + 1] = True
        ids_dev = ids[:, :width].to(logits.device, non_blocking=True)
        mask_dev = mask[:, :width].to(logits.device, non_blocking=True)
        ids_dev[:, 0] = sampled
        lp = compute_token_logprobs(logits, ids_dev).masked_fill(~mask_dev, float("-inf"))
        ranks = (logits > logits.gather(1, sampled[:, None])).sum(1)
        return LogprobsTensors(ids_dev.int(), lp, ranks)
