"""Out-of-range token ids in the penalties' ``bincount``, from vLLM's ``tests/v1/sample/test_penalty_bincount_oob.py``.

That test file belongs to vLLM PR #49081 ("add token-domain bounds check to penalty bincount
kernel"), still OPEN in Sept 2026: merged vLLM's ``_bincount_kernel`` masks by position only,
so a token id equal to ``vocab_size`` (e.g. an input-only audio token) writes into the next
request's row. The cases hold as in #49081's branch (stored copy at commit e793f233): a
vocabulary of 128, two rows, ``max_model_len`` 64, only row 0 rebuilt.

Adapted:

* the function is Exercise 3.5's ``bincount`` (solutions/03_pinned_transfers.ipynb), same
  arguments as vLLM's Model Runner V2 ``bincount``;
* vLLM packs the prompt flags 32 to an int32 word (``prompt_bin_mask`` [2, 4]); the lab keeps
  one int32 flag per token ([2, 128], see ``synclab/engine/penalties.py``), so "bit 5 of word
  0" reads ``prompt_bin_mask[0, 5] == 1`` and "word 3, bit 31" reads ``prompt_bin_mask[0, 127]``;
* vLLM skips below compute capability 8.0 (Triton); the lab's torch version runs anywhere,
  here on the lab's device (the CPU standing in for a GPU when there is none).

The lab's own ``bincount_kernel``/``bincount_baseline`` are merged vLLM's kernel on purpose
(chapter 3 teaches the guard as #49081's): the last test pins that they lack it.

Not translated: ``tests/v1/worker/test_gpu_bincount_i64.py`` (open PR #57524, int32 row
offsets that wrap past 2**31). It is a different bug, and its case needs an ~8.6 GiB
``[65536, 32769]`` table on a CUDA device, far from this folder's CPU time budget.
"""

from __future__ import annotations

import pytest
import torch

from synclab.device import pick_device, to_device
from synclab.engine.penalties import bincount_baseline
from tests.upstream.adapters import solution

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

VOCAB_SIZE = 128
NUM_ROWS = 2
MAX_MODEL_LEN = 64


def _run(impl, row0_tokens: list[int], prompt_len: int, prefill_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rebuild row 0 from ``row0_tokens``; return (prompt_bin_mask, output_bin_counts) on the host."""
    device = pick_device()
    all_token_ids = torch.zeros(NUM_ROWS, MAX_MODEL_LEN, dtype=torch.int32)
    all_token_ids[0, :len(row0_tokens)] = torch.tensor(row0_tokens, dtype=torch.int32)
    prompt_lens = torch.tensor([prompt_len, 0], dtype=torch.int32)
    prefill_lens = torch.tensor([prefill_len, 0], dtype=torch.int32)
    prompt_bin_mask = to_device(torch.zeros(NUM_ROWS, VOCAB_SIZE, dtype=torch.int32), device)
    output_bin_counts = to_device(torch.zeros(NUM_ROWS, VOCAB_SIZE, dtype=torch.int32), device)
    impl(to_device(torch.tensor([0], dtype=torch.int32), device), to_device(all_token_ids, device),
         to_device(prompt_lens, device), to_device(prefill_lens, device), prompt_bin_mask, output_bin_counts,
         max_prefill_len=prefill_len)
    return prompt_bin_mask.cpu(), output_bin_counts.cpu()


def test_oob_prompt_token_no_cross_row_bitset_corruption() -> None:
    """A prompt token id == vocab_size must not flag anything in the next row."""
    mask, counts = _run(solution(3, "bincount"), [5, VOCAB_SIZE], prompt_len=2, prefill_len=2)
    assert mask[0, 5] == 1
    assert mask[0].sum() == 1
    assert not mask[1].any()
    assert not counts[1].any()


def test_oob_output_token_no_cross_row_counts_corruption() -> None:
    """An output token id == vocab_size is not counted, in its row or the next."""
    mask, counts = _run(solution(3, "bincount"), [10, VOCAB_SIZE], prompt_len=1, prefill_len=2)
    assert mask[0, 10] == 1
    assert counts[0].sum() == 0
    assert not counts[1].any()
    assert not mask[1].any()


def test_boundary_valid_token_correctly_recorded() -> None:
    """The last valid id, vocab_size - 1, is flagged in its own row (vLLM: word 3, bit 31)."""
    mask, counts = _run(solution(3, "bincount"), [VOCAB_SIZE - 1], prompt_len=1, prefill_len=1)
    assert mask[0, VOCAB_SIZE - 1] == 1
    assert mask[0].sum() == 1
    assert not mask[1].any()


@pytest.mark.parametrize("tokens,prompt_len,table", [([5, VOCAB_SIZE], 2, "prompt_bin_mask"),
                                                    ([10, VOCAB_SIZE], 1, "output_bin_counts")],
                         ids=["prompt", "output"])
def test_lab_baseline_is_merged_vllm_without_the_guard(tokens: list[int], prompt_len: int, table: str) -> None:
    """Not an upstream case: the lab's baseline kernel, like merged vLLM, writes into the next row.

    On purpose: it is the code before #49081, and chapter 3 has the reader add the guard.
    Row 0's id 128 lands in column 0 of row 1.
    """
    mask, counts = _run(bincount_baseline, tokens, prompt_len, prefill_len=2)
    tables = {"prompt_bin_mask": mask, "output_bin_counts": counts}
    assert tables[table][1, 0] == 1
