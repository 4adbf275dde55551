"""Chapter 0 (the primer): what the chapter runs: the inputs, the batches and steps, the runs the checks and the profiles share.

A room of :mod:`synclab.primer` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from synclab.device import DeviceLike, to_device
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


@dataclass
class DecodeBatch:
    """The state one decode step reads and updates (names follow vLLM's InputBatch)."""

    logits: torch.Tensor  # [num_reqs, vocab_size] device: this step's model output
    seq_lens_gpu: torch.Tensor  # [num_reqs] int64 device: tokens so far, as the model saw them
    seq_lens_cpu: torch.Tensor  # [num_reqs] int64 host: the same lengths, kept on the host
    output_token_ids: list[list[int]]  # per request: generated tokens so far (host lists)
    max_model_len: int  # a request is finished when it reaches this many tokens
    eos_token_id: int

    @property
    def num_reqs(self) -> int:
        return len(self.output_token_ids)


@dataclass
class StepOutput:
    sampled_token_ids: list[int]  # [num_reqs]
    finished: list[bool]  # [num_reqs]


def make_batch(
    num_reqs: int,
    vocab_size: int = 128,
    *,
    rng: random.Random | None = None,
    eos_token_id: int = 0,
    max_model_len: int = 64,
    device: DeviceLike | None = None,
) -> DecodeBatch:
    """A random decode batch: some requests hit EOS, some hit the length limit."""
    rng = rng or random.Random(0)
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    logits = torch.randn(num_reqs, vocab_size, generator=gen)  # [num_reqs, vocab_size]
    for i in range(num_reqs):
        if rng.random() < 0.2:  # make EOS the argmax for about one request in five
            logits[i, eos_token_id] = logits[i].max() + 1.0
    seq_lens = [rng.randrange(1, max_model_len) for _ in range(num_reqs)]
    outputs = [[rng.randrange(1, vocab_size) for _ in range(rng.randrange(0, 4))] for _ in range(num_reqs)]
    seq_lens_cpu = torch.tensor(seq_lens, dtype=torch.int64).reshape(num_reqs)
    return DecodeBatch(
        logits=to_device(logits, device),
        seq_lens_gpu=to_device(seq_lens_cpu, device),
        seq_lens_cpu=seq_lens_cpu.clone(),
        output_token_ids=outputs,
        max_model_len=max_model_len,
        eos_token_id=eos_token_id,
    )


def copy_batch(batch: DecodeBatch) -> DecodeBatch:
    """An independent copy (decode steps mutate their batch)."""
    def device_copy(t: torch.Tensor) -> torch.Tensor:
        return to_device(t.detach().cpu(), t.device if t.is_cuda else None)

    return DecodeBatch(
        logits=device_copy(batch.logits),
        seq_lens_gpu=device_copy(batch.seq_lens_gpu),
        seq_lens_cpu=batch.seq_lens_cpu.clone(),
        output_token_ids=[list(o) for o in batch.output_token_ids],
        max_model_len=batch.max_model_len,
        eos_token_id=batch.eos_token_id,
    )


@answer_key("0.1", role="baseline (the obvious step: 2 syncs per request)", scope="checks",
            name="primer.decode_step_baseline")
def decode_step_baseline(batch: DecodeBatch) -> StepOutput:
    """The step written the obvious way: correct, and about 2 syncs per request + 1."""
    if torch.isnan(batch.logits).any():  # sync: `if` needs the value on the host
        raise ValueError("NaN in logits")
    sampled, finished = [], []
    for i in range(batch.num_reqs):
        token = int(batch.logits[i].argmax())  # sync per request: the host waits for the argmax
        seq_len = int(batch.seq_lens_gpu[i])  # sync per request: a length the host already knows
        done = token == batch.eos_token_id or seq_len + 1 >= batch.max_model_len
        batch.output_token_ids[i].append(token)
        sampled.append(token)
        finished.append(done)
    batch.seq_lens_gpu += 1  # device-side update: queued, no sync
    batch.seq_lens_cpu += 1
    return StepOutput(sampled, finished)


def batch_of(case: dict, device: DeviceLike | None = None) -> DecodeBatch:
    """The decode batch a case of Exercise 0.1's checks names, as data: the same batch in every process.

    ``case``: ``num_reqs``, ``vocab``, ``seed`` (of :func:`make_batch`) and ``kind``: ``"plain"``, ``"eos"`` (every
    request samples EOS), ``"at_limit"`` (every request reaches ``max_model_len``), ``"one_short"`` (every request
    one token short of it) or ``"nan"`` (one NaN logit, at ``nan_at``). On ``device``, the lab's device unless
    named (a check's reference makes it on the host)."""
    batch = make_batch(case["num_reqs"], case["vocab"], rng=random.Random(case["seed"]), device=device)
    if case["kind"] == "eos":
        batch.logits[:, batch.eos_token_id] = 100.0
    elif case["kind"] in ("at_limit", "one_short"):  # this step reaches the limit, or the next one will
        length = batch.max_model_len - (1 if case["kind"] == "at_limit" else 2)
        batch.seq_lens_cpu.fill_(length)
        batch.seq_lens_gpu.fill_(length)
    elif case["kind"] == "nan":
        row, column = case["nan_at"]
        batch.logits[row, column] = float("nan")
    return batch
