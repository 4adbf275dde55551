"""Bad words, translated from vLLM's ``tests/v1/sample/test_sampler.py::test_sampler_bad_words``.

Cases as on vLLM main around PR #41429 (the PR chapter 3 follows; later copies also expect
every bad word that shares the matched prefix to be banned, as here): batch sizes 1, 2 and 32,
bad-word lengths ``(1,)``, ``(1, 3)`` and ``(2, 2)``, a vocabulary of 1024, 20 output tokens
per request, equal logits. After the ban, exactly the last tokens of the matching bad
words are ``-inf`` in each row; every other logit stays finite.

Adapted: vLLM goes through ``Sampler.apply_logits_processors`` and ``SamplingMetadata``; the
lab's entry point is ``synclab/engine/bad_words.py::apply_bad_words(logits,
bad_words_token_ids, past_tokens_ids, single_batch)``. Under test: Exercise 3.8's
``_apply_bad_words_single_batch`` and the lab's pre-#41429 baseline. vLLM draws its cases with
an unseeded NumPy generator; here each case has a fixed seed, on the lab's device (the CPU
standing in for a GPU when there is none).
"""

from __future__ import annotations

import random

import pytest
import torch

from synclab.device import pick_device, to_device
from synclab.engine.bad_words import SingleBatchFunction, _apply_bad_words_single_batch_baseline, apply_bad_words
from tests.upstream.adapters import solution

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

VOCAB_SIZE = 1024
NUM_OUTPUT_TOKENS = 20
SINGLE_BATCH = {"solution": solution(3, "_apply_bad_words_single_batch"),
                "baseline": _apply_bad_words_single_batch_baseline}


def _make_case(rng: random.Random, batch_size: int, lengths: tuple[int, ...]
               ) -> tuple[dict[int, list[list[int]]], list[list[int]], dict[int, set[int]]]:
    """Bad words per row, output histories, and the tokens each row must have banned.

    As vLLM's helpers do: every row gets one bad word of each length (one row of a batch of
    2 or more gets none); a one-token word is always banned; for longer words the history is
    made to end with the word's prefix (then every word with that prefix is banned, and no
    other history change follows) or to end with a token that is in no bad word at all.
    """
    outputs = [[rng.randrange(VOCAB_SIZE) for _ in range(NUM_OUTPUT_TOKENS)] for _ in range(batch_size)]
    bad_words = {row: [[rng.randrange(VOCAB_SIZE) for _ in range(n)] for n in lengths] for row in range(batch_size)}
    if batch_size >= 2:
        del bad_words[rng.randrange(batch_size)]
    banned: dict[int, set[int]] = {}
    for row, words in bad_words.items():
        history, must_ban = outputs[row], set()
        for word in words:
            if len(word) == 1:
                must_ban.add(word[0])
            elif rng.random() < 0.5:
                prefix = word[:-1]
                history[-len(prefix):] = prefix
                must_ban.update(w[-1] for w in words if w[:-1] == prefix)
                break
            else:
                in_words = {t for w in words for t in w}
                history[-1] = rng.choice([t for t in range(VOCAB_SIZE) if t not in in_words])
        banned[row] = must_ban
    return bad_words, outputs, banned


@pytest.mark.parametrize("impl", SINGLE_BATCH, ids=str)
@pytest.mark.parametrize("batch_size", [1, 2, 32])
@pytest.mark.parametrize("bad_words_lengths", [(1,), (1, 3), (2, 2)], ids=str)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampler_bad_words(impl: str, batch_size: int, bad_words_lengths: tuple[int, ...], seed: int) -> None:
    """test_sampler_bad_words: exactly the matching words' last tokens become -inf, per row."""
    rng = random.Random(f"{seed}-{batch_size}-{bad_words_lengths}")
    bad_words, outputs, banned = _make_case(rng, batch_size, bad_words_lengths)
    logits = to_device(torch.full((batch_size, VOCAB_SIZE), 1e-2), pick_device())
    single_batch: SingleBatchFunction = SINGLE_BATCH[impl]
    apply_bad_words(logits, bad_words, outputs, single_batch=single_batch)
    logits = logits.cpu()
    for row in range(batch_size):
        is_inf = logits[row] == float("-inf")
        assert set(torch.nonzero(is_inf).flatten().tolist()) == banned.get(row, set()), f"row {row}"
        assert torch.isfinite(logits[row][~is_inf]).all(), f"row {row}"
