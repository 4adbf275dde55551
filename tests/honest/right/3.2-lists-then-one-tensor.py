# padded rows built as Python lists (itertools), one torch.tensor(..., pin_memory=) each; the mask made on the device
import itertools


class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        device = logits.device
        asked = [logprob_token_ids.get(row, []) for row in range(len(logits))]
        longest = max(map(len, asked))
        padded = [list(itertools.chain([0], ids, itertools.repeat(0, longest - len(ids)))) for ids in asked]
        ids_host = torch.tensor(padded, dtype=torch.int64, pin_memory=self.pin_memory)  # [batch, longest + 1]
        lens_host = torch.tensor([len(ids) for ids in asked], dtype=torch.int64, pin_memory=self.pin_memory)
        ids_dev = ids_host.to(device, non_blocking=True)
        lens_dev = lens_host.to(device, non_blocking=True)
        ids_dev = torch.cat([sampled.view(-1, 1).to(ids_dev.dtype), ids_dev[:, 1:]], dim=1)
        columns = torch.arange(longest + 1, device=device)  # a host int: nothing read back
        padding = columns.view(1, -1) > lens_dev.view(-1, 1)
        logprobs = compute_token_logprobs(logits, ids_dev).masked_fill(padding, float("-inf"))
        sampled_logit = torch.take_along_dim(logits, sampled.view(-1, 1), dim=1)
        ranks = torch.count_nonzero(logits > sampled_logit, dim=1)
        return LogprobsTensors(ids_dev.to(torch.int32), logprobs, ranks)
