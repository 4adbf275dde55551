"""The checks keep their answers: an exercise delegated to the package fails its checks, naming what it called.

Each case is the cell a reader might write instead of the exercise: one call to a reference, an answer
key, a measurer or the code before the PR. It is compiled as a notebook cell is (a file outside the
package and its tests), then handed to the exercise's own check function.
"""

from __future__ import annotations

import importlib
import textwrap
from typing import Any, Callable

import pytest

from synclab import capstone as ch6
from synclab import lazy_streams as ch2
from synclab import list_caches as ch5
from synclab import pinned_transfers as ch3
from synclab import primer as ch0
from synclab import reverse_scan as ch4
from synclab import slice_then_split as ch1
from synclab import answer_keys
from tests.notebook_code import load_function

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

CELL_FILE = "/tmp/ipykernel_4242/1234567890.py"  # where ipykernel compiles a cell: outside synclab and tests/
REFUSED = "cannot stand in for your code"


def cell(source: str, **names: Any) -> dict[str, Any]:
    """Run ``source`` as a notebook cell would, with the notebook's imports; its namespace."""
    namespace = {"ch0": ch0, "ch1": ch1, "ch2": ch2, "ch3": ch3, "ch4": ch4, "ch5": ch5, "ch6": ch6, **names}
    exec(compile(textwrap.dedent(source), CELL_FILE, "exec"), namespace)
    return namespace


# The modules a reader's cell reaches into, by the names the cells below use.
_MODULES = {"c0": "synclab.primer.checks", "c2": "synclab.lazy_streams.checks", "c4": "synclab.reverse_scan.checks",
            "c5": "synclab.list_caches.checks", "c6": "synclab.capstone.checks",
            "c3_snippets": "synclab.pinned_transfers.checks.snippets",
            "c3_uploads": "synclab.pinned_transfers.checks.uploads", "spot_the_bug": "synclab.lazy_streams.spot_the_bug",
            **{name: f"synclab.engine.{name}" for name in (
                "bad_words", "input_batch", "input_batch_baseline", "mm_inputs", "model_inputs", "model_runner",
                "ngram_proposer_gpu", "pooler_baseline",
                "penalties", "pooler", "sampler", "scheduler", "torch_utils")}}


def _imports() -> dict[str, Any]:
    return {alias: importlib.import_module(name) for alias, name in _MODULES.items()}


# (exercise, the check function, the reader's cell, the name it defines, the name the failure must give)
DELEGATIONS: list[tuple[str, Callable[..., Any], str, str, str]] = [
    ("0.1", ch0.check_decode_step, """
        def decode_step(batch):
            return c0._decode_step_reference(batch)
     """, "decode_step", "synclab.primer.checks._decode_step_reference"),
    ("0.1", ch0.check_decode_step, """
        def decode_step(batch):
            return ch0.decode_step_baseline(batch)
     """, "decode_step", "primer.decode_step_baseline"),
    ("0.2", ch0.check_predictions, """
        def my_predictions():
            return c0._measure_snippet_syncs()
     """, "my_predictions", "_measure_snippet_syncs"),
    ("1.1", ch1.check_all_pool, """
        class AllPool(pooler.TokenPoolingMethod):
            def split_hidden_states(self, hidden_states, cursor):
                return pooler_baseline.AllPoolBaseline.split_hidden_states(self, hidden_states, cursor)

            def forward(self, hidden_states, pooling_metadata):
                return pooler_baseline.AllPoolBaseline.forward(self, hidden_states, pooling_metadata)
     """, "AllPool", "AllPoolBaseline."),
    ("1.1", ch1.check_all_pool, """
        class AllPool(pooler.TokenPoolingMethod):  # the baseline called as the lab's walkthrough calls it
            def forward(self, hidden_states, pooling_metadata):
                baseline = pooler_baseline.AllPoolBaseline(enable_chunked_prefill=self.enable_chunked_prefill)
                return baseline(hidden_states, pooling_metadata)  # through the base class's __call__
     """, "AllPool", "AllPoolBaseline.forward"),
    ("1.1", ch1.check_all_pool, """
        _split = pooler_baseline.AllPoolBaseline.split_hidden_states  # taken when the cell runs, before any check
        _forward = pooler_baseline.AllPoolBaseline.forward

        class AllPool(pooler.TokenPoolingMethod):
            def split_hidden_states(self, hidden_states, cursor):
                return _split(self, hidden_states, cursor)

            def forward(self, hidden_states, pooling_metadata):
                return _forward(self, hidden_states, pooling_metadata)
     """, "AllPool", "AllPoolBaseline.forward"),
    ("1.2", ch1.check_all_pool_no_sync, """
        class AllPoolNoSync(AllPool):
            receives_group_rows = True

            def split_hidden_states(self, hidden_states, cursor):
                return ch1.IteratesDeviceIndices.split_hidden_states(self, hidden_states, cursor)
     """, "AllPoolNoSync", "IteratesDeviceIndices.split_hidden_states"),
    ("2.1", ch2.check_runner, """
        class AsyncOutputRunner(model_runner.PoolingModelRunner):
            def _pool(self, hidden_states, num_scheduled_tokens, batch):
                raw = self.model.pooler(hidden_states[:num_scheduled_tokens], batch.metadata)
                finished = batch.metadata.get_pooling_cursor().get_finished_mask()
                if self.async_output_copy_stream is None:
                    self.async_output_copy_stream = torch.cuda.Stream()
                return spot_the_bug._SpotTheBugOutput(model_runner.ModelRunnerOutput(list(batch.req_ids)), raw,
                                                      finished, self.async_output_copy_stream,
                                                      wait_for_forward=True, keep_raw=True, pageable=False)
     """, "AsyncOutputRunner", "_SpotTheBugOutput.__init__"),
    ("2.1", ch2.check_runner, """
        class AsyncOutputRunner(model_runner.PoolingModelRunner):
            def _pool(self, hidden_states, num_scheduled_tokens, batch):
                return model_runner.SyncOutputRunner._pool(self, hidden_states, num_scheduled_tokens, batch)
     """, "AsyncOutputRunner", "SyncOutputRunner._pool"),
    ("2.2", ch2.check_diagnosis, """
        def my_diagnosis():
            return {name: c2._diagnose(ch2.inspect_runner(cls)) for name, cls in ch2.SPOT_THE_BUG.items()}
     """, "my_diagnosis", "_diagnose"),
    ("3.1", ch3.check_async_tensor_h2d, """
        def async_tensor_h2d(data, device, dtype=None):
            return torch_utils.async_tensor_h2d_baseline(data, device, dtype)
     """, "async_tensor_h2d", "async_tensor_h2d_baseline"),
    ("3.1", ch3.check_async_tensor_h2d, """
        def async_tensor_h2d(data, device, dtype=None):
            return c3_uploads._host_reference(data, dtype).pin_memory().to(device, non_blocking=True)
     """, "async_tensor_h2d", "_host_reference"),
    ("3.2", ch3.check_gather_specific_token_logprobs, """
        class PinnedSampler(sampler.Sampler):
            def gather_specific_token_logprobs(self, logits, logprob_token_ids, sampled):
                return sampler.SamplerBaseline.gather_specific_token_logprobs(self, logits, logprob_token_ids,
                                                                              sampled)
     """, "PinnedSampler", "SamplerBaseline.gather_specific_token_logprobs"),
    ("3.3", ch3.check_init_model_kwargs, """
        class PinnedInputsRunner(model_inputs.GPUModelRunner):
            def _init_model_kwargs(self):
                return model_inputs.GPUModelRunnerBaseline._init_model_kwargs(self)
     """, "PinnedInputsRunner", "GPUModelRunnerBaseline._init_model_kwargs"),
    ("3.4", ch3.check_fast_prefill, """
        class PinnedInputsRunner(model_inputs.GPUModelRunner):
            def _prepare_kv_sharing_fast_prefill(self, logits_indices):
                return model_inputs.GPUModelRunnerBaseline._prepare_kv_sharing_fast_prefill(self, logits_indices)
     """, "PinnedInputsRunner", "GPUModelRunnerBaseline._prepare_kv_sharing_fast_prefill"),
    ("3.5", ch3.check_bincount, """
        def bincount(*args):
            return penalties.bincount_baseline(*args)
     """, "bincount", "bincount_baseline"),
    ("3.6", ch3.check_sync_predictions, """
        def my_predictions():
            return c3_snippets._measure_snippet_syncs()
     """, "my_predictions", "_measure_snippet_syncs"),
    ("3.8", ch3.check_bad_words, """
        def _apply_bad_words_single_batch(logits, bad_words_token_ids, past_tokens_ids):
            return bad_words._apply_bad_words_single_batch_baseline(logits, bad_words_token_ids, past_tokens_ids)
     """, "_apply_bad_words_single_batch", "_apply_bad_words_single_batch_baseline"),
    ("3.8", ch3.check_ngram_update, """
        def update_ngram_gpu_tensors_incremental(*args):
            return ngram_proposer_gpu.update_ngram_gpu_tensors_incremental_baseline(*args)
     """, "update_ngram_gpu_tensors_incremental", "update_ngram_gpu_tensors_incremental_baseline"),
    ("4.1", ch4.check_update_async_output_token_ids, """
        class ReverseScanBatch(input_batch.InputBatch):
            def update_async_output_token_ids(self):
                return input_batch_baseline.InputBatchBaseline.update_async_output_token_ids(self)
     """, "ReverseScanBatch", "InputBatchBaseline.update_async_output_token_ids"),
    ("4.2", ch4.check_bottleneck_model, """
        def host_bottleneck_length(costs_us, device_step_us, max_length):
            return c4._bottleneck_reference(costs_us, device_step_us, max_length)
     """, "host_bottleneck_length", "_bottleneck_reference"),
    ("5.1", ch5.check_placeholder_range, """
        class ListCachedRange(mm_inputs.PlaceholderRange):
            @functools.cached_property
            def embeds_cumsum(self):
                return None if self.is_embed is None else self.is_embed.cumsum(0).tolist()

            def get_num_embeds(self):
                return c5._PlaceholderRangeReference.get_num_embeds(self)

            def get_embeds_indices_in_range(self, start_idx, end_idx):
                return c5._PlaceholderRangeReference.get_embeds_indices_in_range(self, start_idx, end_idx)
     """, "ListCachedRange", "_PlaceholderRangeReference.get_num_embeds"),
    ("5.2", ch5.check_encoder_scheduler, """
        class EncoderScheduler(scheduler.Scheduler):
            def _try_schedule_encoder_inputs(self, request, num_computed_tokens, num_new_tokens, budget):
                return c5._SchedulerReference._try_schedule_encoder_inputs(self, request, num_computed_tokens,
                                                                           num_new_tokens, budget)
     """, "EncoderScheduler", "_SchedulerReference._try_schedule_encoder_inputs"),
    ("6.2", ch6.check_ablation_row, """
        def ablation_row(config, workload, fixes):
            return c6._ablation_row_reference(config, workload, fixes)
     """, "ablation_row", "_ablation_row_reference"),
    ("6.3", ch6.check_ablation_reading, """
        def my_reading():
            return {k: v for k, v in c6._measured_reading().items() if not k.startswith("_")}
     """, "my_reading", "_measured_reading"),
]


@pytest.mark.parametrize("task,check,source,name,called", DELEGATIONS,
                         ids=[f"{d[0]}-{d[4].rsplit('.', 1)[-1] or d[4]}" for d in DELEGATIONS])
def test_delegating_an_exercise_to_the_package_fails_by_name(task, check, source, name, called):
    import functools

    import torch

    extra = {"torch": torch, "functools": functools, **_imports()}
    if name == "AllPoolNoSync":
        extra["AllPool"] = load_function("solutions/01_slice_then_split.ipynb", "AllPool")
    report = check(cell(source, **extra)[name], seed=0)
    failed = [o for o in report.outcomes if o.status == "failed"]
    assert not report.passed and failed, str(report)
    if task != "5.1":  # (5.1's cell writes embeds_cumsum itself, and that check passes on it)
        assert not [o for o in report.outcomes if o.ok], str(report)  # no check passes on the package's code
    assert [o for o in failed if REFUSED in o.message and called in o.message], str(report)


def test_3_7_delegation_is_refused_on_the_ranks_too():
    from synclab.pinned_transfers.checks import data_parallel as c3_dp

    solution = "solutions/03_pinned_transfers.ipynb"
    namespace: dict = {}
    synchronize = load_function(solution, "_synchronize_dp_ranks", namespace)
    run_ar = cell("""
        def _run_ar(should_ubatch, orig, padded, cudagraph_mode, parallel_config):
            contributions = [(should_ubatch, orig, padded, cudagraph_mode)] * parallel_config.data_parallel_size
            return torch.tensor(c3_dp._run_ar_reference(contributions), dtype=torch.int32)
     """, torch=__import__("torch"), c3_dp=c3_dp)["_run_ar"]
    report = ch3.check_dp_sync(run_ar, synchronize, seed=0)
    failed = [o for o in report.outcomes if o.task == "3.7" and o.status == "failed"]
    assert failed and all("_run_ar_reference" in o.message and REFUSED in o.message for o in failed), str(report)


def test_handing_the_answer_itself_fails_by_name():
    from synclab.primer import checks as c0
    from synclab.reverse_scan import checks as c4
    import functools

    report = ch0.check_predictions(c0._measure_snippet_syncs, seed=0)
    assert not report.passed and "were handed" in report.outcomes[0].message, str(report)
    report = ch4.check_bottleneck_model(functools.partial(c4._bottleneck_reference), seed=0)
    assert all("_bottleneck_reference" in o.message for o in report.outcomes), str(report)


def test_a_refusal_the_readers_code_catches_still_fails_the_check():
    namespace = cell("""
        def my_predictions():
            try:
                c0._measure_snippet_syncs()
            except Exception:
                pass
            return {name: 0 for name in ch0.SNIPPETS}
     """, **_imports())
    report = ch0.check_predictions(namespace["my_predictions"], seed=0)
    assert not report.passed and "_measure_snippet_syncs" in report.outcomes[0].message, str(report)


def test_an_answer_stored_by_a_cell_outside_the_checks_is_refused_too():
    with pytest.raises(answer_keys.AnswerKeyRefused, match="_measure_snippet_syncs"):
        cell("answers = c0._measure_snippet_syncs()", **_imports())


def test_the_code_before_a_pr_may_be_run_outside_the_checks_and_the_checks_use_their_references():
    batch = ch0.make_batch(3)
    namespace = cell("out = ch0.decode_step_baseline(batch)", batch=batch)  # exploring the baseline in a cell
    assert len(namespace["out"].sampled_token_ids) == 3
    solution = load_function("solutions/00_primer.ipynb", "decode_step")
    assert ch0.check_decode_step(solution, seed=0).passed  # the checks call the reference themselves


def test_no_reference_is_exported_by_a_chapter_or_left_in_the_engine():
    import pathlib
    import re

    for package in (ch0, ch1, ch2, ch3, ch4, ch5, ch6):
        exported = [n for n in package.__all__ if re.search(r"reference|diagnose|measure_snippet", n)]
        assert exported == [], f"{package.__name__} exports {exported}"
    engine = pathlib.Path(ch0.__file__).parents[1] / "engine"
    for path in engine.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"^(def|class) \w*[Rr]eference", text, re.M), f"{path.name} holds a reference"
