# a dataclass for the host side of the batch, functools.partial for the pinned allocator, reversed(), a module constant
import functools
from dataclasses import dataclass, field

NEG_INF = float("-inf")


@dataclass
class _HostBatch:
    """The padded ids and their mask, on the host; new tensors for every call."""

    rows: int
    width: int
    pin: bool
    ids: torch.Tensor = field(init=False)
    valid: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        zeros = functools.partial(torch.zeros, self.rows, self.width, pin_memory=self.pin)
        self.ids = zeros(dtype=torch.int64)
        self.valid = zeros(dtype=torch.bool)
        self.valid[:, 0] = True

    def put(self, row: int, token_ids: list[int]) -> None:
        n = len(token_ids)
        if n:
            self.ids[row, 1:n + 1] = torch.tensor(token_ids, dtype=torch.int64)
            self.valid[row, 1:n + 1] = True

    def upload(self, device) -> tuple[torch.Tensor, torch.Tensor]:
        return self.ids.to(device, non_blocking=True), self.valid.to(device, non_blocking=True)


class PinnedSampler(Sampler):
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        """Logprobs of the sampled token and of each request's requested ids."""
        if not logprob_token_ids:
            return None
        batch = _HostBatch(logits.size(0), 1 + max(len(v) for v in logprob_token_ids.values()), self.pin_memory)
        for row in reversed(sorted(logprob_token_ids)):  # any order will do: each row is its own
            batch.put(row, logprob_token_ids[row])
        ids, valid = batch.upload(logits.device)
        ids[:, 0] = sampled
        logprobs = compute_token_logprobs(logits, ids)
        logprobs.masked_fill_(valid.logical_not(), NEG_INF)
        chosen = logits.gather(-1, sampled.unsqueeze(-1))
        return LogprobsTensors(ids.to(torch.int32), logprobs, (logits > chosen).long().sum(-1))
