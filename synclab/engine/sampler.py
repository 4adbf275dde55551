"""The sampler's logprobs for specific token ids: vLLM's ``Sampler.gather_specific_token_logprobs``.

Taught in chapter 3 (pinned ``non_blocking`` transfers). The generative-scoring
API asks, per request, for the logprobs of a given list of token ids. The result
is one padded matrix per batch: column 0 is the sampled token, columns 1.. the
requested ids, padding holds token id 0 with logprob ``-inf``.

* :class:`LogprobsTensors` — the result (device tensors);
* :class:`Sampler` — holds ``pin_memory``, read once from the platform, as vLLM's does;
* :class:`SamplerBaseline` — the code before PR #41429: the padded matrix built on
  the device and filled from Python lists, one blocking upload per request.

The reader writes the pinned version in Exercise 3.2.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from synclab.device import is_pin_memory_available
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


class LogprobsTensors(NamedTuple):
    logprob_token_ids: torch.Tensor  # [batch, max_ids + 1] int32 device: the sampled token, then the requested ids
    logprobs: torch.Tensor  # [batch, max_ids + 1] float32 device: -inf where padded
    selected_token_ranks: torch.Tensor  # [batch] int64 device: how many tokens had a larger logit than the sampled one


def compute_token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """log_softmax over the vocabulary, then the columns ``token_ids`` (vLLM fuses the two in a Triton kernel).

    ``logits`` [batch, vocab], ``token_ids`` [batch, k] int64 -> [batch, k] float32.
    """
    return logits.log_softmax(dim=-1, dtype=torch.float32).gather(-1, token_ids)


class Sampler:
    """The slice of vLLM's ``Sampler`` that chapter 3 needs."""

    def __init__(self) -> None:
        self.pin_memory = is_pin_memory_available()  # False on WSL: never hard-code True

    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        raise NotImplementedError


class SamplerBaseline(Sampler):
    """Before PR #41429: the padded matrix lives on the device and is filled request by request."""

    @answer_key("3.2", role="vLLM's code before #41429", scope="checks", name="SamplerBaseline.gather_specific_token_logprobs")
    def gather_specific_token_logprobs(self, logits: torch.Tensor, logprob_token_ids: dict[int, list[int]],
                                       sampled: torch.Tensor) -> LogprobsTensors | None:
        if not logprob_token_ids:
            return None
        batch_size = logits.shape[0]
        device = logits.device
        max_num_tokens = max(len(tids) for tids in logprob_token_ids.values())
        token_ids_tensor = torch.zeros(batch_size, max_num_tokens + 1, dtype=torch.int64, device=device)
        token_ids_tensor[:, 0] = sampled
        valid_mask = torch.zeros(batch_size, max_num_tokens + 1, dtype=torch.bool, device=device)
        valid_mask[:, 0] = True
        for req_idx, token_ids in logprob_token_ids.items():
            num_tokens = len(token_ids)
            # A Python list to the device: a blocking upload, once per request.
            token_ids_tensor[req_idx, 1:num_tokens + 1] = torch.tensor(token_ids, dtype=torch.int64, device=device)
            valid_mask[req_idx, 1:num_tokens + 1] = True
        logprobs = compute_token_logprobs(logits, token_ids_tensor).masked_fill(~valid_mask, float("-inf"))
        sampled_logits = logits.gather(-1, sampled.unsqueeze(-1))  # [batch, 1]
        token_ranks = (logits > sampled_logits).sum(dim=-1)
        return LogprobsTensors(token_ids_tensor.to(torch.int32), logprobs, token_ranks)
