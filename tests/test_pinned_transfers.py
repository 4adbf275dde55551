"""Chapter 3: the checks pass on the solution, and each check fails on a plausible wrong version."""

from __future__ import annotations

import functools

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from synclab import pinned_transfers as ch3
from synclab.device import has_cuda
from synclab.engine.model_inputs import GPUModelRunnerBaseline
from synclab.engine.penalties import bincount_baseline, bincount_kernel
from synclab.engine.sampler import LogprobsTensors, Sampler, SamplerBaseline, compute_token_logprobs
from synclab.engine.torch_utils import async_tensor_h2d_baseline
from synclab.pinned_transfers.checks.snippets import _measure_snippet_syncs
from tests.check_reports import assert_every_check_shown_to_fail, assert_passes_witness_as, outcome, witnesses
from tests.notebook_code import load_function
from tests.snapshots import matches_report_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

NOTEBOOK = "solutions/03_pinned_transfers.ipynb"
_namespace: dict = {}
async_tensor_h2d = load_function(NOTEBOOK, "async_tensor_h2d", _namespace)
PinnedSampler = load_function(NOTEBOOK, "PinnedSampler", _namespace)
PinnedInputsRunner = load_function(NOTEBOOK, "PinnedInputsRunner", _namespace)
bincount = load_function(NOTEBOOK, "bincount", _namespace)
my_predictions = load_function(NOTEBOOK, "my_predictions", _namespace)


def test_solution_passes_every_check():
    assert ch3.check_async_tensor_h2d(async_tensor_h2d).passed
    assert ch3.check_gather_specific_token_logprobs(PinnedSampler).passed
    assert ch3.check_init_model_kwargs(PinnedInputsRunner).passed
    assert ch3.check_fast_prefill(PinnedInputsRunner).passed
    assert ch3.check_bincount(bincount).passed
    assert ch3.check_sync_predictions(my_predictions).passed


def _passed(monkeypatch, *tasks):
    """The profiles use what passed its checks in this process: say so, whatever ran before."""
    from synclab import checks

    monkeypatch.setattr(checks, "EXERCISE_STATUS", {t: "passed" for t in tasks})


def test_sync_counts_before_and_after(monkeypatch):
    _passed(monkeypatch, "3.1", "3.2", "3.3", "3.4", "3.5", "3.7", "3.8")
    before = {"async_tensor_h2d": async_tensor_h2d_baseline, "sampler": SamplerBaseline,
              "runner": GPUModelRunnerBaseline, "bincount": bincount_baseline}
    after = {"async_tensor_h2d": async_tensor_h2d, "sampler": PinnedSampler, "runner": PinnedInputsRunner,
             "bincount": bincount}
    counts = ch3.sync_counts(before, after, batch_sizes=(1, 16))
    assert counts["gather_specific_token_logprobs"] == {"before": [1, 16], "after": [0, 0]}
    assert counts["_init_model_kwargs"] == {"before": [2, 17], "after": [0, 0]}  # one read per request + the upload
    assert counts["_prepare_kv_sharing_fast_prefill"] == {"before": [1, 1], "after": [0, 0]}
    assert counts["bincount"] == {"before": [2, 2], "after": [0, 0]}
    assert counts["async_tensor_h2d"] == {"before": [1, 1], "after": [0, 0]}
    assert "16 -> 0" in ch3.sync_table(counts, (1, 16))


def test_a_finished_3_3_is_profiled_though_the_stretch_3_4_in_its_class_is_not(monkeypatch, capsys):
    """PinnedInputsRunner holds 3.3 and 3.4: with the stretch 3.4 a stub, the 3.3 row still runs the reader's method."""
    _passed(monkeypatch, "3.1", "3.2", "3.3", "3.5", "3.7", "3.8")

    class HalfDone(PinnedInputsRunner):
        def _prepare_kv_sharing_fast_prefill(self, logits_indices):
            raise NotImplementedError("Exercise 3.4")

    before = {"async_tensor_h2d": async_tensor_h2d_baseline, "sampler": SamplerBaseline,
              "runner": GPUModelRunnerBaseline, "bincount": bincount_baseline}
    after = {"async_tensor_h2d": async_tensor_h2d, "sampler": PinnedSampler, "runner": HalfDone, "bincount": bincount}
    from synclab import checks

    checks.EXERCISE_STATUS["3.4"] = "not implemented"
    counts = ch3.sync_counts(before, after, batch_sizes=(1,))
    assert "_prepare_kv_sharing_fast_prefill" not in counts  # the stub is never called, its row left out
    assert counts["_init_model_kwargs"] == {"before": [2], "after": [0]}  # the reader's 3.3, profiled
    assert counts["bincount"] == {"before": [2], "after": [0]}
    assert "Exercise 3.4 is not written yet" in capsys.readouterr().out
    checks.EXERCISE_STATUS["3.3"] = "not implemented"  # both unfinished: the class runs on neither side
    counts = ch3.sync_counts(before, after, batch_sizes=(1,))
    assert "_init_model_kwargs" not in counts and "_prepare_kv_sharing_fast_prefill" not in counts


def test_snippets_measure_what_the_book_says():
    measured = _measure_snippet_syncs()
    assert list(measured) == ch3.SNIPPETS
    assert measured["f: rows[idx] = 1.5"] == "synchronous host-to-device copy"  # a tensor index: index_put_
    assert measured["g: rows[:, 0] = 1.5"] == "none"  # plain indexing: a view's fill
    assert measured["h: rows[rows > 0]"] == "boolean-mask indexing"
    assert measured["j: torch.empty(16, dtype=torch.int32).copy_(x, non_blocking=True)"] == \
        "non_blocking copy into pageable memory"
    assert sum(v == "none" for v in measured.values()) == 3


def test_no_snippet_is_a_line_the_page_shows():
    """3.6 asks the reader to apply the chapter's rules: a snippet the page prints verbatim is answered by the page."""
    page = (Path(__file__).resolve().parent.parent / "book" / "03_pinned_transfers.md").read_text()
    shown = [name for name in ch3.SNIPPETS if name.split(": ", 1)[1] in page]
    assert not shown, shown


def test_stale_read_shows_the_hazard():
    result = ch3.stale_read(4096)
    assert result["wrong_after_wait"] == 0
    if not has_cuda():  # simulated: every element is garbage until the event is waited for
        assert result == {"device": "simulated", "num_elements": 4096, "wrong_before_wait": 4096, "wrong_after_wait": 0}


def test_bandwidth_needs_a_gpu_and_without_one_draws_only_a_gpu_reference():
    assert ch3.bandwidth_sweep() is None
    drawn = ch3.bandwidth_figures()  # no empty chart: a recorded GPU run's, labelled as such, or nothing
    assert drawn is None or "reference run: NVIDIA" in drawn[-1]


# ----------------------------------------------------------------------------- wrong versions of 3.1


def h2d_pageable(data, device, dtype=None):
    return torch.as_tensor(np.asarray(data) if not isinstance(data, torch.Tensor) else data,
                           dtype=dtype).to(device, non_blocking=True)


def h2d_hard_pinned(data, device, dtype=None):  # the review's catch: pin_memory=True hard-coded
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    host = data.pin_memory() if isinstance(data, torch.Tensor) else torch.tensor(data, dtype=dtype, pin_memory=True)
    return host.to(device=device, dtype=dtype, non_blocking=True)


def h2d_ignores_dtype(data, device, dtype=None):
    return async_tensor_h2d(data, device)


def h2d_blocking_from_pinned(data, device, dtype=None):
    from synclab.device import is_pin_memory_available
    host = torch.tensor(np.asarray(data).tolist() if not isinstance(data, list) else data, dtype=dtype,
                        pin_memory=is_pin_memory_available())
    return host.to(device)


def h2d_returns_host(data, device, dtype=None):
    return torch.tensor(np.asarray(data).tolist() if not isinstance(data, list) else data, dtype=dtype)


def h2d_to_the_labs_device(data, device, dtype=None):  # right, but to pick_device(): the caller's device ignored
    from synclab.device import pick_device
    return async_tensor_h2d(data, pick_device(), dtype)


_STAGING: dict = {}


def h2d_one_staging_buffer(data, device, dtype=None):  # one pinned buffer per shape, refilled on every call
    from synclab.device import is_pin_memory_available

    host = torch.as_tensor(
        np.asarray(data) if not isinstance(data, torch.Tensor) else data, dtype=dtype)
    key = (tuple(host.shape), host.dtype)
    if key not in _STAGING:
        _STAGING[key] = torch.empty(host.shape, dtype=host.dtype, pin_memory=is_pin_memory_available())
    buffer = _STAGING[key]
    buffer.copy_(host)  # the previous call's upload may not have read it yet
    return buffer.to(device, non_blocking=True)


def h2d_through_numpy(data, device, dtype=None):  # np.asarray first: Python floats become float64, not float32
    from synclab.device import is_pin_memory_available

    host = torch.from_numpy(np.array(data, copy=True)) if not isinstance(data, torch.Tensor) else data
    if dtype is not None:
        host = host.to(dtype)
    return (host.pin_memory() if is_pin_memory_available() else host).to(device, non_blocking=True)


def test_a_staging_buffer_kept_across_calls_fails_3_1_not_3_8():
    report = ch3.check_async_tensor_h2d(h2d_one_staging_buffer, seed=0)
    assert outcome(report, "no pinned buffer refilled") == "failed", str(report)
    matches_report_snapshot(report)


def h2d_keeps_the_arrays_dtype(data, device, dtype=None):  # dtype honoured for lists only
    from synclab.device import is_pin_memory_available

    host = torch.tensor(data, dtype=dtype) if isinstance(data, list) else torch.as_tensor(data)
    return (host.pin_memory() if is_pin_memory_available() else host).to(device, non_blocking=True)


def test_an_arrays_dtype_kept_against_the_callers_is_told_to_convert():
    """A learner's 3.1 that ignored dtype for arrays and tensors was told about np.asarray and Python floats, a call it
    never made: the hint names the caller's dtype and the conversion."""
    report = ch3.check_async_tensor_h2d(h2d_keeps_the_arrays_dtype, seed=0)
    assert outcome(report, "same values") == "failed", str(report)
    matches_report_snapshot(report)


def test_python_floats_made_float64_through_numpy_are_told_about_the_dtype():
    report = ch3.check_async_tensor_h2d(h2d_through_numpy, seed=0)
    assert outcome(report, "same values") == "failed", str(report)
    matches_report_snapshot(report)


WRONG_3_1 = [
    (h2d_one_staging_buffer, "no pinned buffer refilled"),
    (async_tensor_h2d_baseline, "0 syncs"),
    (h2d_pageable, "0 syncs"),
    (h2d_hard_pinned, "WSL"),
    (h2d_ignores_dtype, "same values"),
    (h2d_blocking_from_pinned, "0 syncs"),
    (h2d_returns_host, "same values"),
    (h2d_to_the_labs_device, "same values"),
]



# ----------------------------------------------------------------------------- wrong versions of 3.2


class SampledFromHost(PinnedSampler):  # fills column 0 on the host: reads `sampled` back
    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        out = super().gather_specific_token_logprobs(logits, logprob_token_ids, sampled)
        sampled.cpu()
        return out


class NoPaddingMask(PinnedSampler):
    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        out = super().gather_specific_token_logprobs(logits, logprob_token_ids, sampled)
        return out and out._replace(logprobs=compute_token_logprobs(logits, out.logprob_token_ids.long()))


class MasksByValue(PinnedSampler):  # the padding mask built as ids != 0: a requested token 0 is masked as padding
    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        out = super().gather_specific_token_logprobs(logits, logprob_token_ids, sampled)
        if out is None:
            return out
        ids = out.logprob_token_ids.long()  # [batch, max_ids + 1]
        masked = (ids != 0) | (torch.arange(ids.shape[1], device=ids.device) == 0)  # column 0 is the sampled token
        return out._replace(logprobs=compute_token_logprobs(logits, ids).masked_fill(~masked, float("-inf")))


def test_a_mask_built_from_the_ids_values_is_named_on_the_request_it_breaks():
    """A learner's mask (ids != 0) masked a requested token 0: the report showed request 0's row, right to float32
    precision, and a hint about masking the padding, which they had done."""
    report = ch3.check_gather_specific_token_logprobs(MasksByValue, seed=0)
    fixed = next(o for o in report.outcomes if o.name.startswith("fixed cases"))
    assert fixed.status == "failed" and "request 2's row is wrong" in fixed.message, str(report)
    assert "a requested token 0 is real" in fixed.hint


class MaskOneShort(PinnedSampler):  # a learner's mask[r, 1:len(ids)]: the request's last id is masked as padding
    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        out = super().gather_specific_token_logprobs(logits, logprob_token_ids, sampled)
        if out is None:
            return out
        values = out.logprobs.clone()  # [batch, max_ids + 1]
        for row in range(values.shape[0]):
            n = len(logprob_token_ids.get(row, []))
            if n:
                values[row, n] = float("-inf")
        return out._replace(logprobs=values)


def test_a_mask_one_short_is_told_the_slice_is_one_short():
    report = ch3.check_gather_specific_token_logprobs(MaskOneShort, seed=0)
    failed = next(o for o in report.outcomes if o.status == "failed")
    assert "one more than the slice row[1:len(ids)]" in failed.hint, str(report)


class MaskOneLong(PinnedSampler):  # a learner's mask[r, :len(ids) + 2]: the first padded slot is left a value
    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        out = super().gather_specific_token_logprobs(logits, logprob_token_ids, sampled)
        if out is None:
            return out
        values = out.logprobs.clone()  # [batch, max_ids + 1]
        full = compute_token_logprobs(logits, out.logprob_token_ids.long())  # [batch, max_ids + 1], unmasked
        for row in range(values.shape[0]):
            n = len(logprob_token_ids.get(row, []))
            if n + 1 < values.shape[1]:
                values[row, n + 1] = full[row, n + 1]
        return out._replace(logprobs=values)


def test_a_mask_one_long_is_told_where_the_padding_starts():
    """A learner's mask one slot too long was told to "mask the padded slots after the gather", which they had
    done; the hint now names the one slot and where padding starts."""
    report = ch3.check_gather_specific_token_logprobs(MaskOneLong, seed=0)
    failed = next(o for o in report.outcomes if o.status == "failed")
    assert "the first slot past the request's ids, was left unmasked" in failed.hint, str(report)
    assert "padding starts at column len(ids) + 1" in failed.hint


class RankCountsTies(PinnedSampler):  # >= counts the sampled token itself
    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        out = super().gather_specific_token_logprobs(logits, logprob_token_ids, sampled)
        ranks = (logits >= logits.gather(-1, sampled.unsqueeze(-1))).sum(dim=-1)
        return out and out._replace(selected_token_ranks=ranks)


class NoEarlyReturn(Sampler):
    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        width = max(len(t) for t in logprob_token_ids.values())  # ValueError on {}
        return PinnedSampler.gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled) if width >= 0 else None


class FixedWidth(PinnedSampler):  # a hard-coded width of 6 requested ids
    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        return super().gather_specific_token_logprobs(logits, {r: t[:6] for r, t in logprob_token_ids.items()}, sampled)


class PageableSampler(PinnedSampler):
    def __init__(self):
        super().__init__()
        self.pin_memory = False  # as if the flag were never read


class HardPinnedSampler(PinnedSampler):
    def __init__(self):
        super().__init__()
        self.pin_memory = True


class UploadPerRequest(PinnedSampler):
    """Each request's ids go up on their own, pinned and non_blocking: no sync, but an upload per request."""

    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        if not logprob_token_ids:
            return None
        device, width = logits.device, max(len(t) for t in logprob_token_ids.values()) + 1
        ids = torch.zeros(logits.shape[0], width, dtype=torch.int64, device=device)
        mask = torch.zeros(logits.shape[0], width, dtype=torch.bool, device=device)
        mask[:, 0] = True
        for row, wanted in logprob_token_ids.items():
            ids[row, 1:len(wanted) + 1] = torch.tensor(wanted, pin_memory=self.pin_memory).to(device, non_blocking=True)
            mask[row, 1:len(wanted) + 1] = True
        ids[:, 0] = sampled
        logprobs = compute_token_logprobs(logits, ids).masked_fill(~mask, float("-inf"))
        ranks = (logits > logits.gather(-1, sampled.unsqueeze(-1))).sum(dim=-1)
        return LogprobsTensors(ids.to(torch.int32), logprobs, ranks)


class PersistentPinnedBuffers(PinnedSampler):
    """One pinned id matrix and mask kept across calls and refilled: the next call may come before the upload ran."""

    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        if not logprob_token_ids:
            return None
        batch_size = logits.shape[0]
        width = max(len(t) for t in logprob_token_ids.values()) + 1
        if getattr(self, "_ids_cpu", None) is None:  # sized once, for the largest batch this step
            self._ids_cpu = torch.zeros(64 * 16, dtype=torch.int64, pin_memory=self.pin_memory)
            self._mask_cpu = torch.zeros(64 * 16, dtype=torch.bool, pin_memory=self.pin_memory)
        n = batch_size * width  # a contiguous front of the flat buffers: a strided view would upload as pageable
        return _gather_from(self._ids_cpu[:n].view(batch_size, width), self._mask_cpu[:n].view(batch_size, width),
                            logits, logprob_token_ids, sampled)


class BuffersCachedByShape(PinnedSampler):
    """New pinned buffers when the shape changes, the cached ones when it repeats (a steady decode step)."""

    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        if not logprob_token_ids:
            return None
        shape = (logits.shape[0], max(len(t) for t in logprob_token_ids.values()) + 1)
        if getattr(self, "_shape", None) != shape:
            self._shape = shape
            self._ids_cpu = torch.zeros(shape, dtype=torch.int64, pin_memory=self.pin_memory)
            self._mask_cpu = torch.zeros(shape, dtype=torch.bool, pin_memory=self.pin_memory)
        return _gather_from(self._ids_cpu, self._mask_cpu, logits, logprob_token_ids, sampled)


def _gather_from(ids_cpu, mask_cpu, logits, logprob_token_ids, sampled):
    """3.2's gather, its id matrix and mask refilled in the pinned buffers it is handed."""
    ids_cpu.zero_()
    mask_cpu.zero_()
    mask_cpu[:, 0] = True
    for row, token_ids in logprob_token_ids.items():
        ids_cpu[row, 1:len(token_ids) + 1] = torch.as_tensor(token_ids, dtype=torch.int64)
        mask_cpu[row, 1:len(token_ids) + 1] = True
    ids = ids_cpu.to(logits.device, non_blocking=True)
    mask = mask_cpu.to(logits.device, non_blocking=True)
    ids[:, 0] = sampled
    logprobs = compute_token_logprobs(logits, ids).masked_fill(~mask, float("-inf"))
    ranks = (logits > logits.gather(-1, sampled.unsqueeze(-1))).sum(dim=-1)
    return LogprobsTensors(ids.to(torch.int32), logprobs, ranks)


@pytest.mark.parametrize("seed", range(5))
def test_pinned_buffers_cached_by_shape_fail_on_every_seed(seed):
    report = ch3.check_gather_specific_token_logprobs(BuffersCachedByShape, seed=seed)
    assert outcome(report, "no pinned buffer written before its upload ran") == "failed", str(report)


WRONG_3_2 = [
    (BuffersCachedByShape, "no pinned buffer written before its upload ran"),
    (PersistentPinnedBuffers, "no pinned buffer written before its upload ran"),
    (SamplerBaseline, "0 syncs"),
    (SampledFromHost, "0 syncs"),
    (NoPaddingMask, "fixed cases"),
    (NoPaddingMask, "random batches"),
    (RankCountsTies, "fixed cases"),
    (NoEarlyReturn, "None"),
    (FixedWidth, "random batches"),
    (PageableSampler, "0 syncs"),
    (HardPinnedSampler, "WSL"),
    (UploadPerRequest, "as many uploads"),
]



# ----------------------------------------------------------------------------- wrong versions of 3.3 and 3.4


class DeviceLengths(PinnedInputsRunner):  # reads the device lengths back, all at once
    def _init_model_kwargs(self):
        self.optimistic_seq_lens_cpu[:self.input_batch.num_reqs] = torch.tensor(
            self.seq_lens[:self.input_batch.num_reqs].tolist(), dtype=torch.int32)
        return super()._init_model_kwargs()


class StrictBoundary(PinnedInputsRunner):  # > instead of >=: the document's first token gets type 0
    def _init_model_kwargs(self):
        out = super()._init_model_kwargs()
        if out:
            shifted = self._token_type_id_requests()
            lens = self.optimistic_seq_lens_cpu[:self.input_batch.num_reqs].tolist()
            ids = [(torch.arange(n) > shifted.get(i, n)).int() for i, n in enumerate(lens)]
            out["token_type_ids"] = ch3.to_device(torch.cat(ids))
        return out


class AlwaysPassesTypes(PinnedInputsRunner):
    def _init_model_kwargs(self):
        if not self.is_pooling_model:
            return {}
        lens = self.optimistic_seq_lens_cpu[:self.input_batch.num_reqs].tolist()
        return {"token_type_ids": ch3.to_device(torch.zeros(sum(lens), dtype=torch.int32))}


class PageableTypes(PinnedInputsRunner):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.pin_memory = False


class HardPinnedTypes(PinnedInputsRunner):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.pin_memory = True


class WholeLengthBuffer(PinnedInputsRunner):  # a learner's: every entry of the max_num_reqs buffer, stale ones too
    def _init_model_kwargs(self):
        boundaries = self._token_type_id_requests()
        if not self.is_pooling_model or not boundaries:
            return {}
        lens = [n for n in self.optimistic_seq_lens_cpu.tolist() if n > 0]  # zeros skipped, stale lengths kept
        ids = [(torch.arange(n) >= boundaries.get(i, n)).int() for i, n in enumerate(lens)]
        return {"token_type_ids": ch3.to_device(torch.cat(ids))}


class ZeroPadding(PinnedInputsRunner):
    def _prepare_kv_sharing_fast_prefill(self, logits_indices):
        n = logits_indices.shape[0]
        assert n > 0
        buf = self.kv_sharing_fast_prefill_logits_indices
        buf[:n].copy_(logits_indices)
        buf[n:] = 0
        return buf[:self.pad_for_cudagraph(n)]


class StaleTail(PinnedInputsRunner):  # copies the indices, leaves the tail as the last step left it
    def _prepare_kv_sharing_fast_prefill(self, logits_indices):
        n = logits_indices.shape[0]
        assert n > 0
        self.kv_sharing_fast_prefill_logits_indices[:n].copy_(logits_indices)
        return self.kv_sharing_fast_prefill_logits_indices[:self.pad_for_cudagraph(n)]


class NewTensor(PinnedInputsRunner):  # right values, but not in the buffer CUDA graphs replay with
    def _prepare_kv_sharing_fast_prefill(self, logits_indices):
        padded = super()._prepare_kv_sharing_fast_prefill(logits_indices)
        return padded.clone()


class SilentOnEmpty(PinnedInputsRunner):
    def _prepare_kv_sharing_fast_prefill(self, logits_indices):
        if logits_indices.shape[0] == 0:
            return self.kv_sharing_fast_prefill_logits_indices[:0]
        return super()._prepare_kv_sharing_fast_prefill(logits_indices)


class PadsOnlyToTheGraphSize(PinnedInputsRunner):  # fills up to the padded size: the buffer's rest stays stale
    def _prepare_kv_sharing_fast_prefill(self, logits_indices):
        n = logits_indices.shape[0]
        assert n > 0
        padded = self.pad_for_cudagraph(n)
        buf = self.kv_sharing_fast_prefill_logits_indices
        buf[:n].copy_(logits_indices)
        buf[n:padded] = logits_indices[-1]
        return buf[:padded]


def test_padding_only_to_the_graph_size_fails_with_the_whole_tail_named():
    report = ch3.check_fast_prefill(PadsOnlyToTheGraphSize, seed=0)
    assert outcome(report, "fixed cases") == "failed", str(report)
    matches_report_snapshot(report)


class Unpadded(PinnedInputsRunner):
    def _prepare_kv_sharing_fast_prefill(self, logits_indices):
        return super()._prepare_kv_sharing_fast_prefill(logits_indices)[:logits_indices.shape[0]]


WRONG_3_3 = [
    (GPUModelRunnerBaseline, "0 syncs"),
    (DeviceLengths, "0 syncs"),
    (StrictBoundary, "fixed case"),
    (StrictBoundary, "random batches"),
    (AlwaysPassesTypes, "nothing to pass"),
    (PageableTypes, "0 syncs"),
    (HardPinnedTypes, "WSL"),
    (WholeLengthBuffer, "a batch that shrank"),
]
WRONG_3_4 = [
    (PadsOnlyToTheGraphSize, "fixed cases"),
    (GPUModelRunnerBaseline, "0 syncs"),
    (ZeroPadding, "fixed cases"),
    (StaleTail, "fixed cases"),
    (StaleTail, "random steps"),
    (NewTensor, "fixed cases"),
    (SilentOnEmpty, "fail loudly"),
    (Unpadded, "random steps"),
]




# ----------------------------------------------------------------------------- wrong versions of 3.5


def bincount_noop_zero(idx_mapping, all_token_ids, prompt_len, prefill_len, mask, counts, max_len):
    idx = idx_mapping.long()
    mask[idx].zero_()  # zeroes a copy: the bug a reviewer caught
    counts[idx].zero_()
    bincount_kernel(idx, all_token_ids, prompt_len, prefill_len, mask, counts, max_len)


def bincount_zero_all(idx_mapping, all_token_ids, prompt_len, prefill_len, mask, counts, max_len):
    mask.zero_()
    counts.zero_()
    bincount_kernel(idx_mapping, all_token_ids, prompt_len, prefill_len, mask, counts, max_len)


def bincount_masked_fill(idx_mapping, all_token_ids, prompt_len, prefill_len, mask, counts, max_len):
    rows = torch.zeros(mask.shape[0], dtype=torch.bool, device=mask.device)
    rows[idx_mapping.long()] = True  # the same host-scalar copy, one step removed
    mask.masked_fill_(rows.unsqueeze(1), 0)
    counts.masked_fill_(rows.unsqueeze(1), 0)
    bincount_kernel(idx_mapping, all_token_ids, prompt_len, prefill_len, mask, counts, max_len)


def _scatter_add(counts, flat, ones):
    counts.scatter_add_(0, flat, ones)


def _torch_bincount(counts, flat, ones):  # right values; but it reads its input's min and max back
    counts.add_(torch.bincount(flat, weights=ones, minlength=counts.numel()).int())


def _count_with(name, mask_fill, count_positions, count_into=_scatter_add):
    """A bincount that zeroes right, then counts with the given rules (the solution's shape otherwise)."""
    def wrong(idx_mapping, all_token_ids, prompt_len, prefill_len, mask, counts, max_len):
        idx = idx_mapping.long()
        mask.index_fill_(0, idx, 0)
        counts.index_fill_(0, idx, 0)
        pos = torch.arange(max_len, device=all_token_ids.device)
        tokens = all_token_ids[idx, :max_len].long()
        in_prompt = pos < prompt_len[idx].unsqueeze(1)
        in_output = count_positions(pos, in_prompt, prefill_len[idx].unsqueeze(1))
        flat = (idx.unsqueeze(1) * counts.shape[1] + tokens).flatten()
        mask_fill(mask.view(-1), flat, in_prompt.flatten().int())
        count_into(counts.view(-1), flat, in_output.flatten().int())
    wrong.__name__ = name
    return wrong


def _flag(mask, flat, ones):
    mask.scatter_reduce_(0, flat, ones, reduce="amax")


def _output_positions(pos, in_prompt, prefill_len):
    return ~in_prompt & (pos < prefill_len)


bincount_sums_prompt_flags = _count_with("bincount_sums_prompt_flags", _scatter_add, _output_positions)
bincount_counts_stale_tokens = _count_with("bincount_counts_stale_tokens", _flag,
                                           lambda pos, in_prompt, prefill_len: ~in_prompt)
bincount_with_torch_bincount = _count_with("bincount_with_torch_bincount", _flag, _output_positions, _torch_bincount)
bincount_without_guard = _count_with("bincount_without_guard", _flag, _output_positions)  # vLLM's merged kernel


def bincount_masks_but_does_not_clamp(idx_mapping, all_token_ids, prompt_len, prefill_len, mask, counts, max_len):
    """Masks the out-of-range positions, but their index still points into the next row (or past the table)."""
    idx = idx_mapping.long()
    mask.index_fill_(0, idx, 0)
    counts.index_fill_(0, idx, 0)
    pos = torch.arange(max_len, device=all_token_ids.device)
    tokens = all_token_ids[idx, :max_len].long()
    ok = tokens < counts.shape[1]
    in_prompt = (pos < prompt_len[idx].unsqueeze(1)) & ok
    in_output = (pos >= prompt_len[idx].unsqueeze(1)) & (pos < prefill_len[idx].unsqueeze(1)) & ok
    flat = (idx.unsqueeze(1) * counts.shape[1] + tokens).flatten()
    mask.view(-1).scatter_reduce_(0, flat, in_prompt.flatten().int(), reduce="amax")
    counts.view(-1).scatter_add_(0, flat, in_output.flatten().int())


def _bincount_variant(name, zero=("mask", "counts"), read_at="slot", write_at="slot", flags="amax"):
    """The solution's bincount with one thing done the way a learner might: which tables it zeroes, which rows
    it reads the requests' tokens and lengths from and scatters into (each request's slot, or its batch position
    0..n-1), and how it writes the prompt flags (scatter_reduce_ 'amax', or a plain scatter_)."""
    def wrong(idx_mapping, all_token_ids, prompt_len, prefill_len, mask, counts, max_len):
        idx = idx_mapping.long()
        position = torch.arange(idx.shape[0], device=idx.device)  # the batch positions
        read, write = (idx if read_at == "slot" else position), (idx if write_at == "slot" else position)
        if "mask" in zero:
            mask.index_fill_(0, idx, 0)
        if "counts" in zero:
            counts.index_fill_(0, idx, 0)
        vocab = counts.shape[1]
        pos = torch.arange(max_len, device=all_token_ids.device)
        tokens = all_token_ids[read, :max_len].long()
        ok = (tokens >= 0) & (tokens < vocab)
        in_prompt = (pos < prompt_len[read].unsqueeze(1)) & ok
        in_output = (pos >= prompt_len[read].unsqueeze(1)) & (pos < prefill_len[read].unsqueeze(1)) & ok
        flat = (write.unsqueeze(1) * vocab + tokens.clamp(0, vocab - 1)).flatten()
        if flags == "amax":
            mask.view(-1).scatter_reduce_(0, flat, in_prompt.flatten().int(), reduce="amax")
        else:  # every position writes its 0 or 1: a later 0 overwrites an earlier 1
            mask.view(-1).scatter_(0, flat, in_prompt.flatten().int())
        counts.view(-1).scatter_add_(0, flat, in_output.flatten().int())
    wrong.__name__ = name
    return wrong


bincount_reads_batch_positions = _bincount_variant("bincount_reads_batch_positions", read_at="position")
bincount_writes_batch_positions = _bincount_variant("bincount_writes_batch_positions", write_at="position")
bincount_flags_with_scatter = _bincount_variant("bincount_flags_with_scatter", flags="scatter_")
bincount_zeroes_only_the_mask = _bincount_variant("bincount_zeroes_only_the_mask", zero=("mask",))
bincount_zeroes_only_the_counts = _bincount_variant("bincount_zeroes_only_the_counts", zero=("counts",))

# (wrong version, the check that must catch it, what its hint must say: the learner's own fault)
NAMED_3_5 = [
    (bincount_reads_batch_positions, "really zeroed", "not by its batch position"),
    (bincount_reads_batch_positions, "random states", "read its tokens and lengths at row i"),
    (bincount_reads_batch_positions, "vocab_size", "rows mixed up by batch position and slot"),  # not the guard
    (bincount_writes_batch_positions, "really zeroed", "was scattered into row i"),
    (bincount_writes_batch_positions, "untouched", "not by its batch position"),
    (bincount_flags_with_scatter, "flagged once", "wrote a 0 over the flag"),
    (bincount_flags_with_scatter, "random states", "scatter_reduce_(..., reduce='amax')"),
    (bincount_zeroes_only_the_mask, "really zeroed", "output_bin_counts was not zeroed (prompt_bin_mask was)"),
    (bincount_zeroes_only_the_counts, "really zeroed", "prompt_bin_mask was not zeroed (output_bin_counts was)"),
    (bincount_noop_zero, "really zeroed", "x[idx].zero_() zeroes a copy"),  # both tables: the copy is the fault
]

WRONG_3_5 = [(wrong, check) for wrong, check, _ in NAMED_3_5] + [
    (bincount_without_guard, "vocab_size"),
    (bincount_masks_but_does_not_clamp, "vocab_size"),
    (bincount_sums_prompt_flags, "flagged once"),
    (bincount_counts_stale_tokens, "flagged once"),
    (bincount_counts_stale_tokens, "random states"),
    (bincount_with_torch_bincount, "0 syncs"),
    (bincount_noop_zero, "really zeroed"),
    (bincount_noop_zero, "random states"),
    (bincount_zero_all, "untouched"),
    (bincount_baseline, "0 syncs"),
    (bincount_masked_fill, "0 syncs"),
]



CHECKERS = {"3.1": (ch3.check_async_tensor_h2d, WRONG_3_1), "3.2": (ch3.check_gather_specific_token_logprobs, WRONG_3_2),
            "3.3": (ch3.check_init_model_kwargs, WRONG_3_3), "3.4": (ch3.check_fast_prefill, WRONG_3_4),
            "3.5": (ch3.check_bincount, WRONG_3_5)}
CASES = [(task, wrong, name) for task, (_, wrongs) in CHECKERS.items() for wrong, name in wrongs]


@pytest.mark.parametrize("task,wrong,failing_check", CASES,
                         ids=[f"{t}-{w.__name__}-{c}" for t, w, c in CASES])
def test_each_check_catches_a_wrong_version(task, wrong, failing_check):
    """Each wrong version fails its check; every check it passes witnesses what the solution's does (the grader
    verifies a passed check by its witness: a bug one check names must not cost another)."""
    report = CHECKERS[task][0](wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)
    right = _right_upload_witnesses(task)
    assert sum(map(bool, right.values())) >= 3  # the checks that compare results are verified
    assert_passes_witness_as(report, right)


# ----------------------------------------------------------------------------- a shortcut taken only while counted


def _counted() -> bool:
    """What code under count_syncs can see: a torch function mode on the stack (every chapter 3 check counts)."""
    return bool(torch.overrides._get_current_function_mode_stack())


def h2d_uploads_zeros_when_counted(data, device, dtype=None):  # right; while counted, the values are never copied
    if not _counted():
        return async_tensor_h2d(data, device, dtype)
    host = torch.as_tensor(np.asarray(data) if not isinstance(data, torch.Tensor) else data, dtype=dtype)
    return async_tensor_h2d(torch.zeros_like(host), device)


class NoPaddingMaskWhenCounted(NoPaddingMask):  # right; while counted, the padded slots are not masked
    def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
        version = NoPaddingMask if _counted() else PinnedSampler
        return version.gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled)


class TypesZeroWhenCounted(PinnedInputsRunner):  # right; while counted, every token gets type 0 (on the device)
    def _init_model_kwargs(self):
        out = super()._init_model_kwargs()
        if out and _counted():
            out["token_type_ids"] = torch.zeros_like(out["token_type_ids"])
        return out


class StaleTailWhenCounted(StaleTail):  # right; while counted, the tail is left as the last step left it
    def _prepare_kv_sharing_fast_prefill(self, logits_indices):
        version = StaleTail if _counted() else PinnedInputsRunner
        return version._prepare_kv_sharing_fast_prefill(self, logits_indices)


COUNTED_SHORTCUTS = [
    ("3.1", h2d_uploads_zeros_when_counted, "0 syncs", "values differ"),
    ("3.1", h2d_uploads_zeros_when_counted, "no pinned buffer refilled", "values differ"),
    ("3.2", NoPaddingMaskWhenCounted, "0 syncs", "padding must be -inf"),
    ("3.2", NoPaddingMaskWhenCounted, "no pinned buffer written", "padding must be -inf"),
    ("3.3", TypesZeroWhenCounted, "0 syncs", "token_type_ids differs"),
    ("3.4", StaleTailWhenCounted, "0 syncs", "padded indices (3 -> 4) differs"),
]


@pytest.mark.parametrize("task,wrong,counting_check,message", COUNTED_SHORTCUTS,
                         ids=[f"{t}-{c}" for t, _, c, _ in COUNTED_SHORTCUTS])
def test_a_call_that_is_counted_is_also_checked(task, wrong, counting_check, message):
    """Code that can tell it is counted gains nothing: the sync and race checks compare the results of the calls they
    count. (Every call of chapter 3's checks is counted, so the value checks fail too.)"""
    report = CHECKERS[task][0](wrong, seed=0)
    (counting,) = [o for o in report.outcomes if counting_check in o.name]
    assert counting.status == "failed" and counting.message.startswith(message), str(report)
    assert counting.case.startswith("the counted call"), str(report)


def hint_of(report, name_part):
    """The hint (and message) the one failing check whose name contains ``name_part`` printed."""
    (match,) = [o for o in report.outcomes if name_part in o.name]
    assert match.status in ("failed", "crashed", "timed out"), str(report)
    return f"{match.message}\n{match.hint}"


@pytest.mark.parametrize("wrong,failing_check,fault", NAMED_3_5,
                         ids=[f"{w.__name__}-{c}" for w, c, _ in NAMED_3_5])
def test_bincount_hints_name_the_fault(wrong, failing_check, fault):
    report = ch3.check_bincount(wrong, seed=0)
    said = hint_of(report, failing_check)
    assert fault in said, said
    assert "flag tokens at positions j < prompt_len" not in said  # no more blaming the prompt positions


def test_a_pinned_buffer_refilled_before_its_upload_ran_is_the_race_and_nothing_else():
    report = ch3.check_gather_specific_token_logprobs(PersistentPinnedBuffers, seed=0)
    assert [o.name for o in report.outcomes if not o.ok] == [ch3.CHECKS_3_2[4].name], str(report)
    said = hint_of(report, "no pinned buffer written before its upload ran")
    assert "a host write into a pinned buffer an upload still needs" in said
    assert "new pinned tensors on every call" in said
    got = next(o.got for o in report.outcomes if not o.ok)
    assert "ids_cpu.to(logits.device, non_blocking=True)" in got  # the upload whose source was refilled, by its line


def test_every_check_is_shown_to_fail():
    assert_every_check_shown_to_fail(ch3.CHECKS_3_1, WRONG_3_1)
    assert_every_check_shown_to_fail(ch3.CHECKS_3_2, WRONG_3_2)
    assert_every_check_shown_to_fail(ch3.CHECKS_3_3, WRONG_3_3)
    assert_every_check_shown_to_fail(ch3.CHECKS_3_4, WRONG_3_4)
    assert_every_check_shown_to_fail(ch3.CHECKS_3_5, WRONG_3_5)


def test_wrong_predictions_fail_with_the_snippet_named():
    def swapped():
        answers = dict(my_predictions())
        f, g = "f: rows[idx] = 1.5", "g: rows[:, 0] = 1.5"
        answers[f], answers[g] = answers[g], answers[f]
        return answers

    report = ch3.check_sync_predictions(swapped)
    assert not report.passed
    matches_report_snapshot(report)  # what each swapped line does, not the kind count_syncs measured
    assert report.outcomes[0].share == 0.8  # eight of ten right: each right prediction earns its share
    assert not ch3.check_sync_predictions(lambda: {k: None for k in ch3.SNIPPETS}).passed
    assert not ch3.check_sync_predictions(lambda: {"a": None}).passed


def test_random_cases_depend_on_the_seed():
    a = ch3.logprob_case(random.Random(1), 4, 64)[1]
    b = ch3.logprob_case(random.Random(2), 4, 64)[1]
    assert a != b


def test_a_stub_reports_not_implemented():
    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise 3.1")

    report = ch3.check_async_tensor_h2d(stub)
    assert {o.status for o in report.outcomes} == {"not implemented"}


@pytest.mark.parametrize("check", ["check_bincount", "check_gather_specific_token_logprobs", "check_bad_words",
                                   "check_ngram_update"])
def test_every_stub_of_chapter_3_reads_not_implemented(check):
    """A stub is "not implemented" in every check: NotImplementedError is a RuntimeError, which 3.5 caught."""
    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise 3.x")

    class StubSampler(Sampler):
        def gather_specific_token_logprobs(self, *args):
            raise NotImplementedError("Exercise 3.2")

    report = getattr(ch3, check)(StubSampler if "gather" in check else stub, seed=0)
    assert {o.status for o in report.outcomes} == {"not implemented"}, str(report)


def test_reading_the_whole_length_buffer_is_caught_on_every_seed_with_the_stale_lengths_named():
    for seed in range(20):
        report = ch3.check_init_model_kwargs(WholeLengthBuffer, seed=seed)
        (shrunk,) = [o for o in report.outcomes if "a batch that shrank" in o.name]
        assert shrunk.status == "failed" and "the lengths past request 2 are stale" in shrunk.case, str(report)


def test_a_read_back_on_wsl_gets_the_read_back_hint_not_keep_non_blocking():
    """SampledFromHost reads `sampled` back: on WSL too the hint must name that, not non_blocking."""
    report = ch3.check_gather_specific_token_logprobs(SampledFromHost, seed=0)
    (wsl,) = [o for o in report.outcomes if "WSL" in o.name]
    assert wsl.status == "failed" and "reads device data back to the host" in wsl.hint, str(report)
    assert "keep non_blocking" not in wsl.hint


def test_predictions_written_as_the_members_names_are_told_to_use_the_member():
    def as_strings():
        return {k: (v.name if v is not None else None) for k, v in my_predictions().items()}

    report = ch3.check_sync_predictions(as_strings)
    assert not report.passed
    assert report.outcomes[0].message == "use the SyncKind member, not its name as a string", str(report)
    assert "SyncKind.H2D_COPY, not 'H2D_COPY'" in report.outcomes[0].hint


def test_the_one_step_row_says_when_it_sums_only_the_sites_written():
    from synclab.pinned_transfers.profiling import ROW_TASKS, per_step

    every = {row: {"before": [2], "after": [0]} for row in ROW_TASKS}
    assert list(per_step(every))[-1] == "one step, every site"
    core_only = {row: every[row] for row in ("async_tensor_h2d", "gather_specific_token_logprobs")}
    rows = per_step(core_only)
    assert list(rows) == ["gather_specific_token_logprobs", "one step, the sites written"]
    assert rows["one step, the sites written"] == {"before": [2], "after": [0]}


RIGHT_ANSWERS = {"3.1": async_tensor_h2d, "3.2": PinnedSampler, "3.3": PinnedInputsRunner, "3.4": PinnedInputsRunner,
                 "3.5": bincount}


@functools.cache
def _right_upload_witnesses(task: str) -> dict[str, str]:
    """Each check's witness for the solution of ``task`` on seed 0 (computed once for every wrong version)."""
    return witnesses(CHECKERS[task][0](RIGHT_ANSWERS[task], seed=0))


def test_an_upload_to_a_device_of_its_own_choosing_is_told_to_use_the_callers():
    """The contract's "a tensor on `device`" has its case: the caller names the host, and a helper that uploads to
    the lab's device instead fails that case alone, told so."""
    report = ch3.check_async_tensor_h2d(h2d_to_the_labs_device, seed=0)
    (values,) = [o for o in report.outcomes if "same values" in o.name]
    assert values.status == "failed" and "device the caller names" in values.message, str(report)
    assert "the `device` argument" in values.hint and "device='cpu'" in values.case, str(report)
    assert all(o.ok for o in report.outcomes if o is not values), str(report)


# ----------------------------------------------------------------------------- the staging copy, pictured


def _staging_cell(page: str) -> list[dict[str, float]]:
    """The keyword arguments of the page's two ``simulate_uploads`` calls (pageable, then pinned)."""
    import re

    calls = re.findall(r"simulate_uploads\(([^)]*)\)", page.split("```{code-cell}", 2)[2].split("```")[0])
    return [{k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", call)} for call in calls]


def test_the_staging_copy_picture_and_its_sentence_are_one_model():
    """Chapter 3's second picture: the sentence under it states the costs the cell plays, and what the model makes of
    them; its host and device costs are the first picture's (the same model)."""
    import re

    from synclab.timeline_model import simulate_uploads

    text = (Path(__file__).resolve().parent.parent / "book" / "03_pinned_transfers.md").read_text()
    page = " ".join(text.split())
    pageable_kw, pinned_kw = _staging_cell(text)
    assert pageable_kw["staging_us"] > 0 and pinned_kw["staging_us"] == 0
    assert {k: v for k, v in pageable_kw.items() if k != "staging_us"} == \
        {k: v for k, v in pinned_kw.items() if k != "staging_us"}
    first = dict(re.findall(r"(host_us|device_us)=([\d.]+)", text.split("simulate(", 1)[1].split(")")[0]))
    assert {k: float(v) for k, v in first.items()} == {k: pageable_kw[k] for k in ("host_us", "device_us")}
    assert f"{first['host_us']} us of host and {first['device_us']} us of device work per step" in page
    pageable, pinned = simulate_uploads(**pageable_kw), simulate_uploads(**pinned_kw)
    sentence = (f"The same **model**, one `non_blocking` upload per step (a {pageable_kw['copy_us']:g} us copy): from "
                f"pageable memory `.to()` returns once the host has staged the data in a pinned buffer "
                f"({pageable_kw['staging_us']:g} us), from pinned memory at once. No sync either way, yet a step takes "
                f"{pageable.step_time_us:.0f} us against {pinned.step_time_us:.0f}")
    assert sentence in page, sentence
    # "(not the 60 above: the copy runs on the stream, before the step's kernels)": the first picture's step
    # without syncs, and the pinned step is that plus the copy
    from synclab.timeline_model import simulate

    no_sync = simulate(host_us=pageable_kw["host_us"], device_us=pageable_kw["device_us"], syncs=0, steps=4)
    assert pinned.step_time_us == no_sync.step_time_us + pageable_kw["copy_us"]
    assert f"{sentence} (not the {no_sync.step_time_us:.0f} above: the copy runs on the stream, before the step's " \
           "kernels)." in page
    assert not any(i.state.startswith("waiting") for run in (pageable, pinned) for i in run.intervals)


def test_the_staging_model_holds_the_host_in_to_and_queues_a_pinned_copy_at_once():
    from synclab import figures
    from synclab.timeline_model import simulate, simulate_uploads

    pageable = simulate_uploads(host_us=40, device_us=60, copy_us=10, staging_us=50)
    pinned = simulate_uploads(host_us=40, device_us=60, copy_us=10, staging_us=0)
    staged = [i for i in pageable.intervals if i.state.startswith("staging")]
    assert len(staged) == pageable.steps and all(i.lane == "host" for i in staged)
    assert not any(i.state.startswith("staging") for i in pinned.intervals)
    for run in (pageable, pinned):  # the copy after the host's call, the kernel after the copy, on one stream
        copies = [i for i in run.intervals if i.lane == "copy engine"]
        kernels = [i for i in run.intervals if i.lane == "device"]
        host_ends = [max(i.end_us for i in run.intervals if i.lane == "host" and i.step == k) for k in range(run.steps)]
        assert all(c.start_us >= h + run.launch_us for c, h in zip(copies, host_ends))
        assert all(k.start_us == c.end_us for c, k in zip(copies, kernels))
        assert all(b.start_us >= a.end_us for a, b in zip(kernels, copies[1:]))
    # steady state: the slower of the host (its work, plus the staging copy) and the stream (the copy, then the kernel)
    assert pageable.step_time_us == max(40 + 50, 10 + 60) == 90
    assert pinned.step_time_us == max(40, 10 + 60) == 70
    fig = figures.before_after_rows(pageable, pinned, "t", labels=("pageable", "pinned"))
    assert list(fig.layout.yaxis.categoryarray)[::-1] == [f"{label} · {lane}" for label in ("pageable", "pinned")
                                                         for lane in ("host", "copy engine", "device")]
    assert "90 us per step, GPU busy 67%, 50 us of it the host's staging copy" in fig.layout.title.text
    plain = figures.before_after_rows(simulate(40, 60, 3, steps=4), simulate(40, 60, 0, steps=4), "t")
    assert [t.name for t in plain.data] == ["host: queueing work", "host: waiting (sync)", "device: kernel"]
    assert len(plain.layout.yaxis.categoryarray) == 4 and plain.layout.height == 380
