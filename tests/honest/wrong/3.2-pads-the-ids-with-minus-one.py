# Pads the id matrix with -1, as chapter 4's sampled rows are padded: an id outside the vocabulary reaches the gather
# (a learner's torch.empty did the same with whatever the memory held, and got a bare IndexError).
# fails: fixed-cases
class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids.

        ``logits`` [batch, vocab] (device), ``logprob_token_ids`` {row: ids} (host),
        ``sampled`` [batch] int64 (device). Returns None when no request asked; otherwise a ``LogprobsTensors``
        on the device: ids [batch, max_ids + 1] int32, logprobs the same shape float32 (-inf where padded),
        ranks [batch] int64.
        """
        batch_size, device = logits.shape[0], logits.device
        if not logprob_token_ids:
            return None
        max_num_tokens = max(len(tids) for tids in logprob_token_ids.values())
        # Yours: end with, on the device, token_ids_tensor [batch, max_num_tokens + 1] int64 (column 0 the sampled
        # token) and valid_mask (the same shape, bool, False where padded).
        # Built on the host, in pinned memory where the platform has it (self.pin_memory is False on WSL).
        token_ids_cpu = torch.full((batch_size, max_num_tokens + 1), -1, dtype=torch.int64, pin_memory=self.pin_memory)
        valid_mask_cpu = torch.zeros(batch_size, max_num_tokens + 1, dtype=torch.bool, pin_memory=self.pin_memory)
        valid_mask_cpu[:, 0] = True  # the sampled token is always valid
        for req_idx, token_ids in logprob_token_ids.items():
            num_tokens = len(token_ids)
            token_ids_cpu[req_idx, 1:num_tokens + 1] = torch.as_tensor(token_ids, dtype=torch.int64)
            valid_mask_cpu[req_idx, 1:num_tokens + 1] = True
        token_ids_tensor = token_ids_cpu.to(device, non_blocking=True)  # [batch, max_num_tokens + 1]
        valid_mask = valid_mask_cpu.to(device, non_blocking=True)
        token_ids_tensor[:, 0] = sampled  # on the device: reading `sampled` back would be a sync
        # Given: the logprobs (-inf where padded), the sampled token's rank, and the result.
        logprobs = compute_token_logprobs(logits, token_ids_tensor).masked_fill(~valid_mask, float("-inf"))
        sampled_logits = logits.gather(-1, sampled.unsqueeze(-1))  # [batch, 1]
        token_ranks = (logits > sampled_logits).sum(dim=-1)  # [batch]: logits strictly larger than the sampled one
        return LogprobsTensors(token_ids_tensor.to(torch.int32), logprobs, token_ranks)