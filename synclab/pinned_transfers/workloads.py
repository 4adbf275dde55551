"""Chapter 3 (pinned non_blocking transfers): what the chapter runs: the batches the checks and the profiles share.

A room of :mod:`synclab.pinned_transfers`: logprob requests for the sampler (3.2), cross-encoder batches for
the runner's token types (3.3), and the penalty tables' state (3.5).
"""

from __future__ import annotations

import random
from typing import Any

import torch

from synclab.device import to_device
from synclab.engine.model_inputs import GPUModelRunner
from synclab.engine.pool_metadata import PoolingParams
from synclab.engine.sampler import Sampler

SamplerClass = type[Sampler]
RunnerClass = type[GPUModelRunner]


def logprob_case(rng: random.Random, batch_size: int, vocab_size: int, max_ids: int = 6,
                 share_with_ids: float = 0.7,
                 device: Any = None) -> tuple[torch.Tensor, dict[int, list[int]], torch.Tensor]:
    """Device logits [batch, vocab], the requested ids per request (some requests ask for none), device sampled [batch].

    ``device``: where the tensors live (default ``pick_device()``; ``SIM_DEVICE`` under simulated streams).
    """
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    logits = torch.randn(batch_size, vocab_size, generator=gen) * 3  # [batch, vocab]
    ids = {r: [rng.randrange(vocab_size) for _ in range(rng.randint(0, max_ids))]
           for r in range(batch_size) if rng.random() < share_with_ids}
    sampled = torch.tensor([rng.randrange(vocab_size) for _ in range(batch_size)])  # [batch]
    return to_device(logits, device), ids, to_device(sampled, device)


def token_type_case(rng: random.Random, num_reqs: int, share_with_types: float = 0.5,
                    max_len: int = 64) -> tuple[list[PoolingParams], list[int]]:
    """Requests (some with a compressed token-type boundary in ``0..len``) and their sequence lengths."""
    lens = [rng.randint(1, max_len) for _ in range(num_reqs)]
    params = [PoolingParams("classify", {"compressed_token_type_ids": rng.randint(0, n)})
              if rng.random() < share_with_types else PoolingParams("classify") for n in lens]
    return params, lens


def runner_for(runner_cls: RunnerClass, params: list[PoolingParams], lens: list[int],
               **kwargs: Any) -> GPUModelRunner:
    """A runner of ``runner_cls`` holding these requests."""
    runner = runner_cls(**kwargs)
    runner.set_requests(params, lens)
    return runner


def penalty_state(rng: random.Random, num_slots: int, vocab_size: int, max_len: int) -> dict[str, Any]:
    """Host lists for every slot: tokens, prompt and prefill lengths, and stale tables left by earlier requests."""
    prompt_len = [rng.randint(0, max_len) for _ in range(num_slots)]
    prefill_len = [rng.randint(p, max_len) for p in prompt_len]
    return {
        "all_token_ids": [[rng.randrange(vocab_size) for _ in range(max_len)] for _ in range(num_slots)],
        "prompt_len": prompt_len, "prefill_len": prefill_len,
        "prompt_bin_mask": [[int(rng.random() < 0.3) for _ in range(vocab_size)] for _ in range(num_slots)],
        "output_bin_counts": [[rng.randint(0, 4) for _ in range(vocab_size)] for _ in range(num_slots)],
    }


def device_state(state: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The host lists of :func:`penalty_state` as int32 device tensors."""
    return {k: to_device(torch.tensor(v, dtype=torch.int32)) for k, v in state.items()}
