# uploads the mask with a plain .to(device): a synchronous upload (the ids go up non_blocking)
# fails: no-syncs
class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids.

        ``logits`` [batch, vocab] (device), ``logprob_token_ids`` {row: ids} (host),
        ``sampled`` [batch] int64 (device). Returns None when no request asked; otherwise a ``LogprobsTensors``
        on the device: ids [batch, max_ids + 1] int32, logprobs the same shape float32 (-inf where padded),
        ranks [batch] int64.
        """
        if not logprob_token_ids:
            return None
        batch_size = logits.shape[0]
        device = logits.device
        max_num_tokens = max(len(tids) for tids in logprob_token_ids.values())
        # Built on the host, in pinned memory where the platform has it (self.pin_memory is False on WSL).
        token_ids_cpu = torch.zeros(batch_size, max_num_tokens + 1, dtype=torch.int64, pin_memory=self.pin_memory)
        valid_mask_cpu = torch.zeros(batch_size, max_num_tokens + 1, dtype=torch.bool, pin_memory=self.pin_memory)
        valid_mask_cpu[:, 0] = True  # the sampled token is always valid
        for req_idx, token_ids in logprob_token_ids.items():
            num_tokens = len(token_ids)
            token_ids_cpu[req_idx, 1:num_tokens + 1] = torch.as_tensor(token_ids, dtype=torch.int64)
            valid_mask_cpu[req_idx, 1:num_tokens + 1] = True
        token_ids_tensor = token_ids_cpu.to(device, non_blocking=True)  # [batch, max_num_tokens + 1]
        valid_mask = valid_mask_cpu.to(device)  # blocking: the host waits for this one upload
        token_ids_tensor[:, 0] = sampled  # on the device: reading `sampled` back would be a sync
        logprobs = compute_token_logprobs(logits, token_ids_tensor).masked_fill(~valid_mask, float("-inf"))
        sampled_logits = logits.gather(-1, sampled.unsqueeze(-1))  # [batch, 1]
        token_ranks = (logits > sampled_logits).sum(dim=-1)
        return LogprobsTensors(token_ids_tensor.to(torch.int32), logprobs, token_ranks)