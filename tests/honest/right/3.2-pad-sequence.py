# torch.nn.utils.rnn.pad_sequence over per-request host tensors, then .pin_memory() when the platform has it
from torch.nn.utils.rnn import pad_sequence


class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        per_row = [torch.tensor([0, *logprob_token_ids.get(r, ())], dtype=torch.long) for r in range(logits.shape[0])]
        ids_host = pad_sequence(per_row, batch_first=True)  # [batch, max_ids + 1], 0-padded, on the host
        lens = torch.tensor([len(t) for t in per_row])
        valid_host = torch.arange(ids_host.shape[1]) < lens[:, None]
        if self.pin_memory:
            ids_host, valid_host = ids_host.pin_memory(), valid_host.pin_memory()
        ids = ids_host.to(logits.device, non_blocking=True)
        valid = valid_host.to(logits.device, non_blocking=True)
        ids[:, 0] = sampled
        logprobs = torch.where(valid, compute_token_logprobs(logits, ids), -torch.inf)
        target = logits.gather(1, sampled[:, None])
        return LogprobsTensors(ids.int(), logprobs, logits.gt(target).sum(-1))
