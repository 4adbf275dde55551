"""Chapter 3 — pinned ``non_blocking`` transfers: workloads, checks and profiling helpers.

The components of PR #41429, each with its baseline in ``synclab/engine/``:

* 3.1 ``async_tensor_h2d`` (``engine/torch_utils.py``): host data into pinned memory, then a non-blocking upload;
* 3.2 ``Sampler.gather_specific_token_logprobs`` (``engine/sampler.py``): the padded id matrix built on pinned host memory;
* 3.3 ``GPUModelRunner._init_model_kwargs`` (``engine/model_inputs.py``): token types from host-side lengths;
* 3.4 ``GPUModelRunner._prepare_kv_sharing_fast_prefill``: the tail padded from a device scalar, not ``.item()``;
* 3.5 ``bincount`` (``engine/penalties.py``): rows zeroed with ``index_fill_``, not ``x[idx] = 0``;
* 3.6 predict which sync each snippet performs, then measure.

Every check runs as on a GPU machine with pinned memory (``simulated_pinning(True)``)
and, where memory gets pinned, once more as on WSL (``simulated_pinning(False)``).
"""

from __future__ import annotations

import random
from typing import Any, Callable, Iterator

import numpy as np
import torch

from synclab.checks import Check, CheckFailed, CheckReport, expect, expect_equal, run_checks
from synclab.device import is_device_tensor, is_pin_memory_available, pick_device, to_device
from synclab.engine.model_inputs import (GPUModelRunner, fast_prefill_reference, token_type_ids_reference)
from synclab.engine.penalties import bincount_reference
from synclab.engine.pool_metadata import PoolingParams
from synclab.engine.sampler import LogprobsTensors, Sampler, gather_reference
from synclab.engine.sim_pinning import PinnedMemoryUnavailable, simulated_pinning
from synclab.engine.torch_utils import host_reference
from synclab.claims import Faster, Within, declare, validated
from synclab.syncs import SyncReport, count_syncs

H2DFunction = Callable[..., torch.Tensor]
SamplerClass = type[Sampler]
RunnerClass = type[GPUModelRunner]
BincountFunction = Callable[..., None]

PIN_HINT = ("build the host tensor in pinned memory (pin_memory=<is_pin_memory_available()>, or t.pin_memory()) "
            "and upload it with .to(device, non_blocking=True)")
WSL_HINT = ("on WSL is_pin_memory_available() is False and pinning raises: pass the flag "
            "(pin_memory=self.pin_memory), never a hard-coded True")


def _counted(fn: Callable[[], Any]) -> tuple[Any, SyncReport]:
    with count_syncs() as report:
        result = fn()
    return result, report


def _expect_no_syncs(report: SyncReport, what: str, hint: str, case: str = "", staged_ok: bool = False) -> None:
    """No device wait; and, unless ``staged_ok`` (WSL: nothing can be pinned), no staging copy either."""
    expect(report.count == 0, f"{what} synchronised with the device", expected="0 syncs",
           got=f"{report.count}: " + "; ".join(f"{e.kind.value} at {e.where} `{e.code}`" for e in report.events),
           hint=hint, case=case)
    if not staged_ok:
        expect(report.staged_count == 0, f"{what} uploaded from pageable memory: the host copied the data into a "
               "staging buffer itself", expected="0 staging copies",
               got=f"{report.staged_count}: " + "; ".join(f"at {e.where} `{e.code}`" for e in report.staged),
               hint=hint, case=case)


def _on_wsl(fn: Callable[[], Any], case: str) -> tuple[Any, SyncReport]:
    """Run ``fn`` as on WSL: pinning unavailable. It must not raise."""
    try:
        return _counted(fn)
    except PinnedMemoryUnavailable as exc:
        raise CheckFailed("asked for pinned memory where the platform has none", got=str(exc).split(":")[0],
                          hint=WSL_HINT, case=case) from None


# ----------------------------------------------------------------------------- Exercise 3.1: async_tensor_h2d


def _h2d_cases(rng: random.Random) -> list[tuple[str, Any, torch.dtype | None]]:
    n = rng.randint(0, 600)
    ints = [rng.randrange(-1000, 1000) for _ in range(n)]
    floats = [rng.uniform(-1, 1) for _ in range(n)]
    grid = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    return [
        ("list of ints", [3, 1, 4, 1, 5], None),
        ("list of ints, dtype=int32", [3, 1, 4, 1, 5], torch.int32),
        ("nested list, dtype=float32", [[1, 2], [3, 4], [5, 6]], torch.float32),
        ("empty list, dtype=int32", [], torch.int32),
        ("NumPy int32 array", np.array([7, 8, 9], dtype=np.int32), None),
        ("NumPy float64 array, dtype=float32", np.linspace(0, 1, 7), torch.float32),
        ("CPU tensor, dtype=int32", torch.arange(10), torch.int32),
        ("transposed CPU tensor", grid.t(), None),
        (f"random list of {n} ints", ints, rng.choice([None, torch.int32, torch.int64])),
        (f"random NumPy array of {n} floats", np.array(floats, dtype=np.float32), None),
        (f"random CPU tensor of {n} ints", torch.tensor(ints, dtype=torch.int64), rng.choice([None, torch.int32])),
    ]


def _same_upload(got: Any, data: Any, dtype: torch.dtype | None, case: str) -> None:
    want = host_reference(data, dtype)
    expect(isinstance(got, torch.Tensor) and is_device_tensor(got), "the result must be a device tensor",
           got=type(got).__name__ if not isinstance(got, torch.Tensor) else "a host tensor",
           hint="return the tensor that .to(device, non_blocking=True) gives back", case=case)
    expect_equal(got.dtype, want.dtype, what="dtype", hint="pass dtype both when building and in .to()", case=case)
    expect_equal(tuple(got.shape), tuple(want.shape), what="shape", case=case)
    expect(torch.equal(got.cpu(), want), "values differ", expected=want.flatten()[:8].tolist(),
           got=got.cpu().flatten()[:8].tolist(), case=case)


def _check_h2d_values(impl: H2DFunction, rng: random.Random) -> None:
    device = pick_device()
    with simulated_pinning(True):
        for case, data, dtype in _h2d_cases(rng):
            got, _ = _counted(lambda: impl(data, device, dtype))
            _same_upload(got, data, dtype, case)


def _check_h2d_syncs(impl: H2DFunction, rng: random.Random) -> None:
    device = pick_device()
    with simulated_pinning(True):
        for case, data, dtype in _h2d_cases(rng):
            _, report = _counted(lambda: impl(data, device, dtype))
            _expect_no_syncs(report, "the upload", PIN_HINT, case)


def _check_h2d_wsl(impl: H2DFunction, rng: random.Random) -> None:
    device = pick_device()
    with simulated_pinning(False):
        for case, data, dtype in _h2d_cases(rng):
            got, report = _on_wsl(lambda: impl(data, device, dtype), case)
            _same_upload(got, data, dtype, case)
            _expect_no_syncs(report, "the upload", "keep non_blocking=True: without pinning it is the best there is", case,
                             staged_ok=True)


CHECKS_3_1 = [
    Check("3.1", "same values, dtype and shape as torch.tensor(data, dtype) for lists, arrays, tensors", _check_h2d_values),
    Check("3.1", "0 syncs: every upload is non_blocking from pinned memory", _check_h2d_syncs),
    Check("3.1", "WSL (no pinned memory): no error, right values, pageable non_blocking upload", _check_h2d_wsl),
]


def check_async_tensor_h2d(impl: H2DFunction, seed: int | None = None) -> CheckReport:
    """Exercise 3.1: run every check against the reader's ``async_tensor_h2d``."""
    return run_checks("Exercise 3.1 — async_tensor_h2d", CHECKS_3_1, impl, seed=seed)


# ----------------------------------------------------------------------------- Exercise 3.2: gather_specific_token_logprobs


def logprob_case(rng: random.Random, batch_size: int, vocab_size: int, max_ids: int = 6,
                 share_with_ids: float = 0.7) -> tuple[torch.Tensor, dict[int, list[int]], torch.Tensor]:
    """Device logits [batch, vocab], the requested ids per request (some requests ask for none), device sampled [batch]."""
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    logits = torch.randn(batch_size, vocab_size, generator=gen) * 3  # [batch, vocab]
    ids = {r: [rng.randrange(vocab_size) for _ in range(rng.randint(0, max_ids))]
           for r in range(batch_size) if rng.random() < share_with_ids}
    sampled = torch.tensor([rng.randrange(vocab_size) for _ in range(batch_size)])  # [batch]
    return to_device(logits), ids, to_device(sampled)


def _same_logprobs(got: Any, logits: torch.Tensor, ids: dict[int, list[int]], sampled: torch.Tensor,
                   case: str) -> None:
    want = gather_reference(logits.cpu(), ids, sampled.cpu().tolist())
    if want is None:
        expect(got is None, "no request asked for token ids: return None", got=type(got).__name__, case=case)
        return
    expect(isinstance(got, LogprobsTensors), "return a LogprobsTensors", got=type(got).__name__, case=case)
    want_ids, want_values, want_ranks = want
    expect_equal(got.logprob_token_ids.dtype, torch.int32, what="dtype of logprob_token_ids", case=case)
    got_ids = got.logprob_token_ids.cpu().tolist()
    for row, (g, w) in enumerate(zip(got_ids, want_ids)):
        expect(g == w, f"token ids of request {row} differ", expected=w, got=g,
               hint="column 0 is the sampled token, then the request's ids, then 0s as padding", case=case)
    expect_equal(len(got_ids), len(want_ids), what="number of rows (one per request, with ids or not)", case=case)
    got_values = got.logprobs.cpu().double()
    want_t = torch.tensor(want_values, dtype=torch.float64)
    expect_equal(tuple(got_values.shape), tuple(want_t.shape), what="shape of logprobs", case=case)
    padded = torch.isinf(want_t)
    expect(bool((torch.isinf(got_values) == padded).all()), "padding must be -inf, and only padding",
           expected=want_values[0], got=got_values[0].tolist(), hint="mask the padded slots after the gather", case=case)
    expect(torch.allclose(got_values[~padded], want_t[~padded], atol=1e-4), "logprobs differ",
           expected=want_values[0], got=got_values[0].tolist(), hint="log_softmax over the vocabulary, then gather",
           case=case)
    expect_equal(got.selected_token_ranks.cpu().tolist(), want_ranks, what="ranks of the sampled tokens",
                 hint="rank = how many logits are strictly larger than the sampled token's", case=case)


_FIXED_LOGPROB_CASES = [
    ("request 1 asks for nothing; token 0 is requested", 3, 8, {0: [1, 2], 2: [0, 5, 7]}),
    ("the sampled token is among the requested ids", 2, 16, {0: [3, 3], 1: [9]}),
    ("a request with an empty list", 2, 8, {0: [], 1: [4]}),
    ("one request", 1, 32, {0: [31, 0, 15, 2]}),
]


def _fixed_logprob_cases(rng: random.Random) -> Iterator[tuple[str, torch.Tensor, dict[int, list[int]], torch.Tensor]]:
    for case, batch, vocab, ids in _FIXED_LOGPROB_CASES:
        logits, _, sampled = logprob_case(rng, batch, vocab)
        yield case, logits, ids, sampled


def _check_gather_fixed(sampler_cls: SamplerClass, rng: random.Random) -> None:
    with simulated_pinning(True):
        sampler = sampler_cls()
        for case, logits, ids, sampled in _fixed_logprob_cases(rng):
            got, _ = _counted(lambda: sampler.gather_specific_token_logprobs(logits, ids, sampled))
            _same_logprobs(got, logits, ids, sampled, case)


def _check_gather_empty(sampler_cls: SamplerClass, rng: random.Random) -> None:
    with simulated_pinning(True):
        logits, _, sampled = logprob_case(rng, 4, 16)
        got, _ = _counted(lambda: sampler_cls().gather_specific_token_logprobs(logits, {}, sampled))
        expect(got is None, "no request asked for token ids: return None", got=type(got).__name__, case="{}")


def _check_gather_random(sampler_cls: SamplerClass, rng: random.Random) -> None:
    with simulated_pinning(True):
        sampler = sampler_cls()
        for trial in range(12):
            batch, vocab = rng.randint(1, 64), rng.choice([16, 1000, 4096])
            logits, ids, sampled = logprob_case(rng, batch, vocab, max_ids=rng.randint(0, 12))
            got, _ = _counted(lambda: sampler.gather_specific_token_logprobs(logits, ids, sampled))
            _same_logprobs(got, logits, ids, sampled, f"random batch {trial}: {batch} requests, vocab {vocab}")


def _check_gather_syncs(sampler_cls: SamplerClass, rng: random.Random) -> None:
    with simulated_pinning(True):
        sampler = sampler_cls()
        logits, ids, sampled = logprob_case(rng, 64, 1000, share_with_ids=1.0)
        _, report = _counted(lambda: sampler.gather_specific_token_logprobs(logits, ids, sampled))
        _expect_no_syncs(report, "gather_specific_token_logprobs", PIN_HINT + "; fill column 0 on the device",
                         "64 requests, all with ids")


def _check_gather_wsl(sampler_cls: SamplerClass, rng: random.Random) -> None:
    with simulated_pinning(False):
        sampler = sampler_cls()
        logits, ids, sampled = logprob_case(rng, 8, 64)
        got, report = _on_wsl(lambda: sampler.gather_specific_token_logprobs(logits, ids, sampled), "8 requests")
        _same_logprobs(got, logits, ids, sampled, "8 requests, no pinned memory")
        _expect_no_syncs(report, "gather_specific_token_logprobs", "keep non_blocking=True", "8 requests",
                         staged_ok=True)


CHECKS_3_2 = [
    Check("3.2", "fixed cases: rows without ids, token 0, the sampled token requested, one request", _check_gather_fixed),
    Check("3.2", "no requested ids: None", _check_gather_empty),
    Check("3.2", "same as a plain reference on random batches (1 to 64 requests, vocab 16 to 4096)",
          _check_gather_random),
    Check("3.2", "0 syncs: the id matrix and the mask built on pinned host memory, uploaded non_blocking",
          _check_gather_syncs),
    Check("3.2", "WSL (no pinned memory): no error, same result", _check_gather_wsl),
]


def check_gather_specific_token_logprobs(sampler_cls: SamplerClass, seed: int | None = None) -> CheckReport:
    """Exercise 3.2: run every check against the reader's ``Sampler`` subclass."""
    return run_checks("Exercise 3.2 — gather_specific_token_logprobs", CHECKS_3_2, sampler_cls, seed=seed)


# ----------------------------------------------------------------------------- Exercise 3.3: _init_model_kwargs


def token_type_case(rng: random.Random, num_reqs: int, share_with_types: float = 0.5,
                    max_len: int = 64) -> tuple[list[PoolingParams], list[int]]:
    """Requests (some with a compressed token-type boundary in ``0..len``) and their sequence lengths."""
    lens = [rng.randint(1, max_len) for _ in range(num_reqs)]
    params = [PoolingParams("classify", {"compressed_token_type_ids": rng.randint(0, n)})
              if rng.random() < share_with_types else PoolingParams("classify") for n in lens]
    return params, lens


def _runner(runner_cls: RunnerClass, params: list[PoolingParams], lens: list[int], **kwargs: Any) -> GPUModelRunner:
    runner = runner_cls(**kwargs)
    runner.set_requests(params, lens)
    return runner


def _same_token_types(got: Any, params: list[PoolingParams], lens: list[int], case: str) -> None:
    want = token_type_ids_reference(params, lens)
    expect(isinstance(got, dict), "_init_model_kwargs returns a dict", got=type(got).__name__, case=case)
    if want is None:
        expect(got == {}, "no request carries token types: return {}", got=sorted(got), case=case)
        return
    expect_equal(sorted(got), ["token_type_ids"], what="keys of the model kwargs", case=case)
    ids = got["token_type_ids"]
    expect(is_device_tensor(ids), "token_type_ids must be on the device", got="a host tensor", case=case)
    expect_equal(ids.dtype, torch.int32, what="dtype of token_type_ids", case=case)
    expect_equal(ids.cpu().tolist(), want, what="token_type_ids",
                 hint="per request: arange(seq_len) >= boundary (no boundary: all 0), concatenated", case=case)


def _check_types_fixed(runner_cls: RunnerClass, rng: random.Random) -> None:
    params = [PoolingParams("classify", {"compressed_token_type_ids": 2}), PoolingParams("classify"),
              PoolingParams("classify", {"compressed_token_type_ids": 0}),
              PoolingParams("classify", {"compressed_token_type_ids": 3})]
    with simulated_pinning(True):
        runner = _runner(runner_cls, params, [5, 3, 4, 3])
        got, _ = _counted(runner._init_model_kwargs)
        _same_token_types(got, params, [5, 3, 4, 3], "boundary 2 of 5, none, 0 of 4, 3 of 3")


def _check_types_no_kwargs(runner_cls: RunnerClass, rng: random.Random) -> None:
    cases = [("no request carries token types", [PoolingParams("classify")] * 3, [4, 2, 7], True),
             ("empty batch", [], [], True),
             ("not a pooling model", [PoolingParams("classify", {"compressed_token_type_ids": 1})], [3], False)]
    with simulated_pinning(True):
        for case, params, lens, pooling in cases:
            runner = _runner(runner_cls, params, lens, is_pooling_model=pooling)
            got, _ = _counted(runner._init_model_kwargs)
            expect(got == {}, "return {}: there is nothing to pass", got=got, case=case)


def _check_types_random(runner_cls: RunnerClass, rng: random.Random) -> None:
    with simulated_pinning(True):
        for trial in range(12):
            params, lens = token_type_case(rng, rng.randint(1, 64), share_with_types=rng.random())
            runner = _runner(runner_cls, params, lens)
            got, _ = _counted(runner._init_model_kwargs)
            _same_token_types(got, params, lens, f"random batch {trial}: {len(lens)} requests")


def _check_types_syncs(runner_cls: RunnerClass, rng: random.Random) -> None:
    with simulated_pinning(True):
        params, lens = token_type_case(rng, 64)
        runner = _runner(runner_cls, params, lens)
        _, report = _counted(runner._init_model_kwargs)
        _expect_no_syncs(report, "_init_model_kwargs",
                         "take the lengths from self.optimistic_seq_lens_cpu (host), not self.seq_lens (device); "
                         + PIN_HINT, "64 requests")


def _check_types_wsl(runner_cls: RunnerClass, rng: random.Random) -> None:
    with simulated_pinning(False):
        params, lens = token_type_case(rng, 8, share_with_types=1.0)
        runner = _runner(runner_cls, params, lens)
        got, report = _on_wsl(runner._init_model_kwargs, "8 requests")
        _same_token_types(got, params, lens, "8 requests, no pinned memory")
        _expect_no_syncs(report, "_init_model_kwargs", "keep non_blocking=True", "8 requests", staged_ok=True)


CHECKS_3_3 = [
    Check("3.3", "fixed case: boundaries 2, none, 0 and at the end", _check_types_fixed),
    Check("3.3", "nothing to pass ({}): no token types, empty batch, not a pooling model", _check_types_no_kwargs),
    Check("3.3", "same as a plain reference on random batches (1 to 64 requests)", _check_types_random),
    Check("3.3", "0 syncs: host-side lengths, pinned buffer, non_blocking upload", _check_types_syncs),
    Check("3.3", "WSL (no pinned memory): no error, same result", _check_types_wsl),
]


def check_init_model_kwargs(runner_cls: RunnerClass, seed: int | None = None) -> CheckReport:
    """Exercise 3.3: run every check against the reader's ``_init_model_kwargs``."""
    return run_checks("Exercise 3.3 — _init_model_kwargs (token_type_ids)", CHECKS_3_3, runner_cls, seed=seed)


# ----------------------------------------------------------------------------- Exercise 3.4: _prepare_kv_sharing_fast_prefill

STALE = 1_000_000  # what an earlier, larger step left in the persistent buffer: an index far past this batch


def _fast_prefill(runner: GPUModelRunner, indices: list[int]) -> tuple[Any, SyncReport]:
    logits_indices = to_device(torch.tensor(indices, dtype=torch.int32), runner.device)  # [n] device
    return _counted(lambda: runner._prepare_kv_sharing_fast_prefill(logits_indices))


def _same_padding(runner: GPUModelRunner, got: Any, indices: list[int], case: str) -> None:
    want = fast_prefill_reference(indices, runner.pad_for_cudagraph(len(indices)))
    expect(isinstance(got, torch.Tensor), "return a tensor", got=type(got).__name__, case=case)
    buf = runner.kv_sharing_fast_prefill_logits_indices
    expect(got.data_ptr() == buf.data_ptr(), "return a slice of the persistent buffer",
           got="a new tensor", hint="CUDA graphs replay with the buffer's address: return buf[:num_padded]", case=case)
    expect_equal(got.cpu().tolist(), want, what=f"padded indices ({len(indices)} -> {len(want)})",
                 hint="copy the indices, then fill the tail with the last one (stale entries point past the batch)",
                 case=case)


def _stale_runner(runner_cls: RunnerClass) -> GPUModelRunner:
    runner = runner_cls(max_num_tokens=1024)
    runner.kv_sharing_fast_prefill_logits_indices.fill_(STALE)
    return runner


def _check_prefill_fixed(runner_cls: RunnerClass, rng: random.Random) -> None:
    cases = [("3 indices, padded to 4", [4, 9, 17]), ("1 index", [0]), ("8 indices: no padding", list(range(3, 11))),
             ("5 indices after a step of 7", [1, 2, 3, 4, 5]), ("600 indices: beyond the captured sizes", list(range(600)))]
    runner = _stale_runner(runner_cls)
    _fast_prefill(runner, list(range(100, 107)))  # a larger step first: its indices stay in the buffer
    for case, indices in cases:
        got, _ = _fast_prefill(runner, indices)
        _same_padding(runner, got, indices, case)


def _check_prefill_empty(runner_cls: RunnerClass, rng: random.Random) -> None:
    runner = _stale_runner(runner_cls)
    try:
        _fast_prefill(runner, [])
    except (AssertionError, ValueError, IndexError):
        return
    expect(False, "no logits indices is a bug upstream: fail loudly (vLLM asserts num_logits > 0)",
           got="returned normally", case="empty logits_indices")


def _check_prefill_random(runner_cls: RunnerClass, rng: random.Random) -> None:
    runner = _stale_runner(runner_cls)
    for trial in range(15):
        n = rng.randint(1, 700)
        indices = sorted(rng.sample(range(4 * n), n))
        got, _ = _fast_prefill(runner, indices)
        _same_padding(runner, got, indices, f"random step {trial}: {n} indices")


def _check_prefill_syncs(runner_cls: RunnerClass, rng: random.Random) -> None:
    runner = _stale_runner(runner_cls)
    _, report = _fast_prefill(runner, [2, 7, 11])
    _expect_no_syncs(report, "_prepare_kv_sharing_fast_prefill",
                     "assign the 0-d device tensor logits_indices[-1] to the tail; .item() reads it back", "3 indices")


CHECKS_3_4 = [
    Check("3.4", "fixed cases: padded with the last index, stale entries overwritten, the buffer returned",
          _check_prefill_fixed),
    Check("3.4", "no logits indices: fail loudly", _check_prefill_empty),
    Check("3.4", "same as a plain reference on random steps (1 to 700 indices)", _check_prefill_random),
    Check("3.4", "0 syncs: the tail is filled on the device", _check_prefill_syncs),
]


def check_fast_prefill(runner_cls: RunnerClass, seed: int | None = None) -> CheckReport:
    """Exercise 3.4: run every check against the reader's ``_prepare_kv_sharing_fast_prefill``."""
    return run_checks("Exercise 3.4 — _prepare_kv_sharing_fast_prefill", CHECKS_3_4, runner_cls, seed=seed)


# ----------------------------------------------------------------------------- Exercise 3.5: bincount


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


def run_bincount(impl: BincountFunction, state: dict[str, Any], slots: list[int]) -> tuple[list, list, SyncReport]:
    """Call ``impl`` on device copies of ``state`` for the new requests in ``slots``; the tables after, and the syncs."""
    dev = {k: to_device(torch.tensor(v, dtype=torch.int32)) for k, v in state.items()}
    idx_mapping = to_device(torch.tensor(slots, dtype=torch.int32))  # [n] device
    max_prefill_len = max((state["prefill_len"][s] for s in slots), default=0)  # a host int, as in vLLM
    _, report = _counted(lambda: impl(idx_mapping, dev["all_token_ids"], dev["prompt_len"], dev["prefill_len"],
                                      dev["prompt_bin_mask"], dev["output_bin_counts"], max_prefill_len))
    return dev["prompt_bin_mask"].cpu().tolist(), dev["output_bin_counts"].cpu().tolist(), report


def _same_tables(impl: BincountFunction, state: dict[str, Any], slots: list[int], case: str) -> SyncReport:
    mask, counts, report = run_bincount(impl, state, slots)
    want_mask, want_counts = bincount_reference(slots, **state)
    for s in range(len(mask)):
        kind = "new request" if s in slots else "untouched"
        hint = ("x[idx].zero_() zeroes a copy: x[idx] gathers the rows into a new tensor"
                if s in slots else "only the new requests' rows may change")
        expect(mask[s] == want_mask[s], f"prompt_bin_mask row {s} ({kind}) differs", expected=want_mask[s][:12],
               got=mask[s][:12], hint=hint, case=case)
        expect(counts[s] == want_counts[s], f"output_bin_counts row {s} ({kind}) differs",
               expected=want_counts[s][:12], got=counts[s][:12], hint=hint, case=case)
    return report


def _check_bincount_fixed(impl: BincountFunction, rng: random.Random) -> None:
    state = {"all_token_ids": [[1, 1, 2, 3], [0, 4, 4, 4], [5, 5, 5, 5], [2, 0, 1, 3]],
             "prompt_len": [2, 1, 4, 0], "prefill_len": [4, 4, 4, 2],
             "prompt_bin_mask": [[1] * 6 for _ in range(4)], "output_bin_counts": [[7] * 6 for _ in range(4)]}
    _same_tables(impl, state, [1, 3], "slots 1 and 3 taken by new requests; stale 1s and 7s everywhere")


def _check_bincount_untouched(impl: BincountFunction, rng: random.Random) -> None:
    state = penalty_state(rng, 6, 12, 5)
    _same_tables(impl, state, [4], "one new request in slot 4 of 6")
    _same_tables(impl, penalty_state(rng, 3, 8, 4), [], "no new request")


def _check_bincount_random(impl: BincountFunction, rng: random.Random) -> None:
    for trial in range(10):
        slots_total, vocab = rng.randint(1, 16), rng.choice([4, 50, 300])
        state = penalty_state(rng, slots_total, vocab, rng.randint(1, 20))
        slots = rng.sample(range(slots_total), rng.randint(0, slots_total))
        _same_tables(impl, state, slots, f"random trial {trial}: {len(slots)} of {slots_total} slots, vocab {vocab}")


def _check_bincount_syncs(impl: BincountFunction, rng: random.Random) -> None:
    state = penalty_state(rng, 16, 300, 20)
    report = _same_tables(impl, state, list(range(0, 16, 2)), "8 new requests in 16 slots")
    _expect_no_syncs(report, "bincount", "x[idx] = 0 copies the 0 from host memory, blocking; "
                     "index_fill_(0, idx, 0) passes it to the kernel", "8 new requests")


CHECKS_3_5 = [
    Check("3.5", "fixed case: the new requests' rows are really zeroed, then recounted", _check_bincount_fixed),
    Check("3.5", "other rows untouched; no new request changes nothing", _check_bincount_untouched),
    Check("3.5", "same as a plain reference on random states", _check_bincount_random),
    Check("3.5", "0 syncs", _check_bincount_syncs),
]


def check_bincount(impl: BincountFunction, seed: int | None = None) -> CheckReport:
    """Exercise 3.5: run every check against the reader's ``bincount``."""
    return run_checks("Exercise 3.5 — bincount (zeroing rows)", CHECKS_3_5, impl, seed=seed)


# ----------------------------------------------------------------------------- Exercise 3.6: which sync, and why


def _snippets(device: Any = None) -> dict[str, Callable[[], object]]:
    """Snippets whose sync the reader predicts. ``x``, ``idx``, ``seq_lens``, ``rows`` live on the device."""
    dev = device if device is not None else pick_device()
    x = to_device(torch.arange(16, dtype=torch.int32), dev)  # [16] device
    idx = to_device(torch.tensor([0, 2]), dev)  # [2] device
    seq_lens = to_device(torch.tensor([7, 3]), dev)  # [2] device
    rows = to_device(torch.ones(4, 8), dev)  # [4, 8] device
    buf = to_device(torch.zeros(32, dtype=torch.int32), dev)  # [32] device
    ids = [3, 1, 4, 1, 5]
    return {
        "a: torch.tensor(ids, device=dev)": lambda: torch.tensor(ids, device=dev),
        "b: torch.tensor(ids).to(dev, non_blocking=True)": lambda: torch.tensor(ids).to(dev, non_blocking=True),
        "c: torch.tensor(ids, pin_memory=pin).to(dev, non_blocking=True)":
            lambda: torch.tensor(ids, pin_memory=is_pin_memory_available()).to(dev, non_blocking=True),
        "d: buf[16:].fill_(x[-1].item())": lambda: buf[16:].fill_(x[-1].item()),
        "e: buf[16:] = x[-1]": lambda: buf.__setitem__(slice(16, None), x[-1]),
        "f: rows[idx] = 0": lambda: rows.__setitem__(idx, 0),
        "g: rows.index_fill_(0, idx, 0)": lambda: rows.index_fill_(0, idx, 0),
        "h: rows[idx].zero_()": lambda: rows[idx].zero_(),
        "i: torch.arange(seq_lens[0])": lambda: torch.arange(seq_lens[0]),
        "j: x.to('cpu', non_blocking=True)": lambda: x.to("cpu", non_blocking=True),
    }


SNIPPETS = list(_snippets("cpu"))  # the names only: no device touched at import


def measure_snippet_syncs() -> dict[str, str]:
    """What each snippet of Exercise 3.6 makes the host wait for (a ``SyncKind`` value, or ``"none"``), on a GPU machine.

    A staging copy (``SyncKind.STAGED_COPY``) counts here too: the host waits for its own copy, not the device.
    """
    measured = {}
    with simulated_pinning(True):
        for name, snippet in _snippets().items():
            _, report = _counted(snippet)
            kinds = sorted({e.kind.value for e in report.events + report.staged})
            measured[name] = " + ".join(kinds) if kinds else "none"
    return measured


def check_sync_predictions(predict: Callable[[], dict[str, Any]], seed: int | None = None) -> CheckReport:
    """Exercise 3.6: compare the reader's predicted sync kinds (``predict()``) with ``count_syncs``."""

    def run(predict: Callable[[], dict[str, Any]], rng: random.Random) -> None:
        preds = predict()
        expect(isinstance(preds, dict), "my_predictions() must return a dict", got=type(preds).__name__)
        expect(set(preds) == set(SNIPPETS), "predict every snippet, by its name", expected=SNIPPETS, got=sorted(preds))
        said = {k: "none" if v is None else getattr(v, "value", v) for k, v in preds.items()}
        measured = measure_snippet_syncs()
        wrong = {k: (said[k], measured[k]) for k in SNIPPETS if said[k] != measured[k]}
        expect(not wrong, f"{len(wrong)} prediction(s) off",
               got="; ".join(f"{k}: you said {p!r}, measured {m!r}" for k, (p, m) in wrong.items()),
               hint="name the SyncKind, or None; the host waits for a device VALUE, a blocking COPY, or staged memory")

    check = Check("3.6", "predicted syncs match count_syncs", run)
    return run_checks("Exercise 3.6 — which sync, and why", [check], predict, seed=seed)


# ----------------------------------------------------------------------------- profiling helpers

BATCH_SIZES = (1, 4, 16, 64, 256)
PROFILE_VOCAB = 4096
BANDWIDTH_SIZES = tuple(4 * 1024 * 4**k for k in range(9))  # 4 KiB to 256 MiB
COPY_VARIANTS = ("pageable, blocking", "pageable, non_blocking", "pinned, blocking", "pinned, non_blocking")


def component_calls(impls: dict[str, Any], num_reqs: int, rng: random.Random) -> dict[str, Callable[[], Any]]:
    """One zero-argument call per component for a batch of ``num_reqs`` requests (build it inside simulated_pinning).

    ``impls`` holds the five implementations under the keys ``"async_tensor_h2d"``,
    ``"sampler"``, ``"runner"`` (3.3 and 3.4) and ``"bincount"``.
    """
    device = pick_device()
    ids = list(range(num_reqs))
    sampler = impls["sampler"]()
    logits, token_ids, sampled = logprob_case(rng, num_reqs, PROFILE_VOCAB, share_with_ids=1.0)
    params, lens = token_type_case(rng, num_reqs, share_with_types=1.0)
    runner = _runner(impls["runner"], params, lens)
    logits_indices = to_device(torch.arange(num_reqs, dtype=torch.int32))  # [num_reqs] device
    state = penalty_state(rng, num_reqs, 64, 8)
    dev = {k: to_device(torch.tensor(v, dtype=torch.int32)) for k, v in state.items()}
    slots = to_device(torch.tensor(ids, dtype=torch.int32))
    bincount = impls["bincount"]
    return {
        "async_tensor_h2d": lambda: impls["async_tensor_h2d"](ids, device, torch.int32),
        "gather_specific_token_logprobs": lambda: sampler.gather_specific_token_logprobs(logits, token_ids, sampled),
        "_init_model_kwargs": runner._init_model_kwargs,
        "_prepare_kv_sharing_fast_prefill": lambda: runner._prepare_kv_sharing_fast_prefill(logits_indices),
        "bincount": lambda: bincount(slots, dev["all_token_ids"], dev["prompt_len"], dev["prefill_len"],
                                     dev["prompt_bin_mask"], dev["output_bin_counts"], 8),
    }


def sync_counts(before: dict[str, Any], after: dict[str, Any],
                batch_sizes: tuple[int, ...] = BATCH_SIZES) -> dict[str, dict[str, list[int]]]:
    """Syncs per call of each component, before and after PR #41429, at each batch size (counted: any machine)."""
    from synclab.reference import record

    counts: dict[str, dict[str, list[int]]] = {}
    for label, impls in (("before", before), ("after", after)):
        for n in batch_sizes:
            with simulated_pinning(True):
                calls = component_calls(impls, n, random.Random(n))
                for component, call in calls.items():
                    counts.setdefault(component, {"before": [], "after": []})[label].append(_counted(call)[1].count)
    record("ch3", "sync_counts", {"batch_sizes": list(batch_sizes), "counts": counts})
    return counts


def sync_table(counts: dict[str, dict[str, list[int]]], batch_sizes: tuple[int, ...] = BATCH_SIZES) -> str:
    """The counts as text: one row per component, ``before -> after`` per batch size."""
    rows = [f"{'syncs per call, before -> after':<34}" + "".join(f"{f'{n} req.':>12}" for n in batch_sizes)]
    for component, c in counts.items():
        rows.append(f"{component:<34}" + "".join(f"{f'{b} -> {a}':>12}" for b, a in zip(c["before"], c["after"])))
    return "\n".join(rows)


declare("ch3.gather_sweep",
        cpu=("On a CPU the two lines agree within 10% at every batch size.", [Within(a=0, b=1, factor=1.1)]),
        gpu=("On a GPU the new version is at least 1.1× faster than the old one from 16 requests up.",
             [Faster(fast=1, slow=0, by=1.1, from_value=16)]))


def gather_sweep(before: SamplerClass, after: SamplerClass, batch_sizes: tuple[int, ...] = BATCH_SIZES) -> Any:
    """Median time of ``gather_specific_token_logprobs`` per batch size, before and after, on this device."""
    from synclab.reference import record
    from synclab.timing import run_time, sweep

    def factory(sampler_cls: SamplerClass) -> Callable[[int], Callable[[], Any]]:
        def build(n: int) -> Callable[[], Any]:
            sampler = sampler_cls()
            logits, ids, sampled = logprob_case(random.Random(n), n, PROFILE_VOCAB, share_with_ids=1.0)
            return lambda: sampler.gather_specific_token_logprobs(logits, ids, sampled)

        return build

    variants = {"before #41429": factory(before), "after (3.2)": factory(after)}
    result = validated("ch3.gather_sweep", lambda: sweep(variants, "requests", batch_sizes,
                                                         min_run_time=run_time(0.1, 0.5), reference="before #41429"))
    record("ch3", "gather_sweep", result.to_dict())
    return result


def profile_gather(before: SamplerClass, after: SamplerClass, num_reqs: int = 64) -> dict[str, Any]:
    """One profiled call of each sampler on the same batch, ready for ``timeline_figure``."""
    from synclab.profiling import profile

    traces = {}
    for name, sampler_cls in (("before #41429", before), ("after (3.2)", after)):
        logits, ids, sampled = logprob_case(random.Random(num_reqs), num_reqs, PROFILE_VOCAB, share_with_ids=1.0)
        traces[name] = profile(sampler_cls().gather_specific_token_logprobs, logits, ids, sampled, warmup=2)
    return traces


def _arrived_intact(copy: torch.Tensor) -> None:
    if not bool((copy == 7).all()):
        raise AssertionError("the uploaded bytes differ from the source: refusing to time it")


def bandwidth_sweep(sizes: tuple[int, ...] = BANDWIDTH_SIZES) -> dict[str, Any] | None:
    """Host-to-device copies from pageable and pinned memory, blocking and not: GB/s and host time. GPU only.

    For each size and variant: the bandwidth (bytes / median time of copy + synchronise, timed
    by ``benchmark``: wall clock around blocks synchronised before and after) and the time the host spends inside the ``.to()``
    call alone (``perf_counter``, the device drained before each call). Returns None
    without a GPU: there is no host-to-device link to measure.
    """
    import time

    from synclab.device import has_cuda
    from synclab.provenance import Provenance
    from synclab.reference import record
    from synclab.timing import Progress, benchmark

    if not has_cuda():
        return None
    result: dict[str, Any] = {"sizes": list(sizes), "gbps": {}, "host_us": {}, "provenance": Provenance.here().to_dict()}
    bar = Progress(len(sizes) * len(COPY_VARIANTS), "host-to-device copies")
    for variant in COPY_VARIANTS:
        pinned, non_blocking = variant.startswith("pinned"), variant.endswith("non_blocking")
        result["gbps"][variant], result["host_us"][variant] = [], []
        for size in sizes:
            src = torch.empty(size, dtype=torch.uint8, pin_memory=pinned).fill_(7)
            timing = benchmark(lambda: src.to("cuda", non_blocking=non_blocking), label=f"{variant} {size} B",
                               check=_arrived_intact, min_run_time=0.2)
            host = []
            for _ in range(20):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                src.to("cuda", non_blocking=non_blocking)
                host.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
            result["gbps"][variant].append(size / (timing.median_us * 1e-6) / 1e9)
            result["host_us"][variant].append(sorted(host)[len(host) // 2])
            bar.step(f"{variant}, {size} B")
    bar.close()
    record("ch3", "bandwidth", result)
    return result


def stale_read(num_elements: int = 1 << 24) -> dict[str, Any]:
    """Read a ``non_blocking`` device-to-host copy before and after waiting for it; count the wrong elements.

    On a GPU: a long kernel queue runs first, so the copy cannot have landed when the
    host reads. On a CPU: the same steps under ``simulated_cuda()``, where the
    buffer holds ``GARBAGE`` until its event is waited for (a model of ordering).
    """
    from synclab.device import has_cuda
    from synclab.engine import sim_cuda
    from synclab.reference import record

    if has_cuda():
        x = torch.randn(2048, 2048, device="cuda")
        for _ in range(20):  # keep the device busy for a while: the copy queues behind this
            x = torch.tanh(x @ x) * 0.5
        values = torch.full((num_elements,), 3.0, device="cuda") + x[0, 0] * 0  # [n], ready only after the queue
        # A sentinel first: the caching host allocator may hand back a pinned block that already holds
        # 3.0 from an earlier run, and a copy that has not landed would then look right.
        host = torch.full((num_elements,), -1.0, pin_memory=True)
        host.copy_(values, non_blocking=True)
        early_wrong = int((host != 3.0).sum())  # read at once: the copy may not have landed
        torch.cuda.synchronize()
        late_wrong = int((host != 3.0).sum())
        result = {"device": "cuda", "num_elements": num_elements, "wrong_before_wait": early_wrong,
                  "wrong_after_wait": late_wrong}
        record("ch3", "stale_read", result)
        return result
    values = torch.full((num_elements,), 3.0)  # stands for device memory inside the simulation
    with sim_cuda.simulated_cuda():
        event = torch.cuda.Event()
        host = sim_cuda.copy_to_host_async(values)
        event.record()
        early_wrong = int((host != 3.0).sum())
        event.synchronize()
        late_wrong = int((host != 3.0).sum())
    return {"device": "simulated", "num_elements": num_elements, "wrong_before_wait": early_wrong,
            "wrong_after_wait": late_wrong}


def bandwidth_figures() -> tuple[Any, Any, str] | None:
    """The two bandwidth charts and their label: measured here on a GPU, else from a recorded GPU reference, else None."""
    from synclab import figures
    from synclab.provenance import Provenance
    from synclab.reference import load

    found, label = bandwidth_sweep(), ""
    if found is not None:
        label = Provenance.from_dict(found["provenance"]).label
    else:
        for data in load("ch3").values():
            if "bandwidth" in data["results"]:
                found, label = data["results"]["bandwidth"], "reference run: " + Provenance.from_dict(data["provenance"]).label
                break
    if found is None:
        return None
    return (figures.bandwidth_figure(found, "gbps", "Host-to-device bandwidth", label),
            figures.bandwidth_figure(found, "host_us", "Time the host spends inside .to()", label), label)
