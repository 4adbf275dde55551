# A path of its own for WSL (no pinned memory): the ids padded with 0 in a Python list, and the mask taken from the
# padding, `ids != 0`, so a request that asks for token 0 loses it there, and only there.
# fails: wsl
class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        shape = (logits.shape[0], 1 + max(len(v) for v in logprob_token_ids.values()))
        if self.pin_memory:
            ids_cpu = torch.zeros(shape, dtype=torch.int64, pin_memory=True)
            mask_cpu = torch.zeros(shape, dtype=torch.bool, pin_memory=True)
            mask_cpu[:, 0] = True
            for r, ids in logprob_token_ids.items():
                ids_cpu[r, 1:len(ids) + 1] = torch.tensor(ids, dtype=torch.int64)
                mask_cpu[r, 1:len(ids) + 1] = True
            ids_dev = ids_cpu.to(logits.device, non_blocking=True)
            mask_dev = mask_cpu.to(logits.device, non_blocking=True)
        else:  # nothing to pin: plain lists, padded with 0
            rows = [[0] + logprob_token_ids.get(r, []) + [0] * (shape[1] - 1 - len(logprob_token_ids.get(r, [])))
                    for r in range(shape[0])]
            ids_dev = torch.tensor(rows, dtype=torch.int64).to(logits.device, non_blocking=True)
            mask_dev = ids_dev != 0
            mask_dev[:, 0] = True
        ids_dev[:, 0] = sampled
        lp = compute_token_logprobs(logits, ids_dev).masked_fill(~mask_dev, float("-inf"))
        ranks = (logits > logits.gather(1, sampled[:, None])).sum(1)
        return LogprobsTensors(ids_dev.int(), lp, ranks)
