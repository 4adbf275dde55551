# Queues both uploads first, then fills the pinned buffers: each upload sends what its buffer held when the copy ran
# (on a CPU, at once: only padding arrives).
# fails: fixed-cases
class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        batch_size, device = logits.shape[0], logits.device
        if not logprob_token_ids:
            return None
        max_num_tokens = max(len(tids) for tids in logprob_token_ids.values())
        token_ids_cpu = torch.zeros(batch_size, max_num_tokens + 1, dtype=torch.int64, pin_memory=self.pin_memory)
        valid_mask_cpu = torch.zeros(batch_size, max_num_tokens + 1, dtype=torch.bool, pin_memory=self.pin_memory)
        token_ids_tensor = token_ids_cpu.to(device, non_blocking=True)  # [batch, max_num_tokens + 1]
        valid_mask = valid_mask_cpu.to(device, non_blocking=True)
        valid_mask_cpu[:, 0] = True
        for req_idx, token_ids in logprob_token_ids.items():  # too late: the uploads are queued already
            num_tokens = len(token_ids)
            token_ids_cpu[req_idx, 1:num_tokens + 1] = torch.as_tensor(token_ids, dtype=torch.int64)
            valid_mask_cpu[req_idx, 1:num_tokens + 1] = True
        token_ids_tensor[:, 0] = sampled
        logprobs = compute_token_logprobs(logits, token_ids_tensor).masked_fill(~valid_mask, float("-inf"))
        sampled_logits = logits.gather(-1, sampled.unsqueeze(-1))  # [batch, 1]
        token_ranks = (logits > sampled_logits).sum(dim=-1)  # [batch]
        return LogprobsTensors(token_ids_tensor.to(torch.int32), logprobs, token_ranks)
