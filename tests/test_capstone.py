"""Chapter 6: the engine's 32 configurations agree, the checks pass on the solution and fail on wrong versions."""

from __future__ import annotations

import random
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from synclab import capstone as ch6
from synclab.capstone import PlantedRunner
from synclab.capstone.checks import NO_STRAY
from synclab.capstone import workloads
from synclab.capstone.workloads import book_fixes
from synclab.engine.engine_core import PATTERNS, EngineConfig, EngineRunner
from synclab.syncs import count_syncs
from tests.check_reports import copied, witness
from tests.notebook_code import load_function

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

SOLUTION = "solutions/06_capstone_engine_step.ipynb"


def solution(name: str):
    return load_function(SOLUTION, name)


@pytest.mark.parametrize("seed", [0, 1])
def test_all_32_configurations_compute_the_same_outputs(seed):
    fixes = book_fixes()
    mix = ch6.random_mix(random.Random(seed), num_requests=7)
    want = ch6.comparable(ch6.run_engine(mix, EngineConfig.baseline(), fixes))
    assert any(tokens for tokens, _, _ in want.values()) and any(e for _, _, e in want.values())
    for config in EngineConfig.all_combinations():
        got = ch6.comparable(ch6.run_engine(mix, config, fixes))
        assert ch6.first_difference(got, want) is None, config.label


def test_each_fix_removes_syncs_and_all_five_leave_none_stray():
    table = ch6.sync_table(ch6.ablation_workload(16), components=book_fixes())
    base = table["baseline"][0]
    for pattern in PATTERNS:
        if pattern not in ("reverse_scan", "list_cache"):  # host work, not syncs (chapters 4 and 5)
            assert table[pattern][0] < base, pattern
    assert table["all fixes"][0] == 0
    assert 0 < table["all fixes"][1] <= 1  # one planned wait per step at most


def test_busy_share_on_synthetic_traces():
    assert ch6.busy_share([], 0, 10) == 0
    assert ch6.busy_share([(0, 10)], 0, 10) == 1
    assert ch6.busy_share([(2, 4), (6, 8)], 0, 10) == pytest.approx(0.4)
    assert ch6.busy_share([(2, 6), (4, 8)], 0, 10) == pytest.approx(0.6)  # overlap counted once
    assert ch6.busy_share([(2, 8), (3, 4)], 0, 10) == pytest.approx(0.6)  # nested
    assert ch6.busy_share([(-5, 2), (9, 15)], 0, 10) == pytest.approx(0.3)  # clipped to the window
    assert ch6.busy_share([(20, 30)], 0, 10) == 0
    with pytest.raises(ValueError):
        ch6.busy_share([(0, 1)], 5, 5)


# ----------------------------------------------------------------------------- 6.1


def test_sync_hunt_passes_on_the_solution():
    report = ch6.check_sync_hunt(solution("clean_runner"), seed=3)
    assert report.passed, report


def test_sync_hunt_fails_on_the_planted_runner():
    """A runner that changes nothing earns nothing: its right outputs and flat work count once its syncs are gone."""
    report = ch6.check_sync_hunt(lambda: copied(PlantedRunner), seed=3)  # on its merits: its syncs
    failed = {o.name for o in report.outcomes if o.status == "failed"}
    assert failed == {NO_STRAY}, report
    assert all(o.status == "skipped" for o in report.outcomes if o.name != NO_STRAY), report
    assert report.earned == 0
    stray = next(o for o in report.outcomes if not o.ok)
    lines = stray.message.split(" line(s): ")[1].split("; ")
    assert len(lines) >= 3 and all("planted.py:" in line for line in lines), stray.got  # every line, not the first
    assert len(set(lines)) == len(lines)  # each once


def _variant(**overrides):
    clean = solution("clean_runner")()
    return lambda: type("Wrong", (clean,), overrides)


def _bias_entries(reqs):
    """(rows, token ids, values) of every request's logit bias, as host lists."""
    rows, cols, values = [], [], []
    for row, request in enumerate(reqs):
        for token, bias in request.sampling.logit_bias:
            rows.append(row)
            cols.append(token)
            values.append(bias)
    return rows, cols, values


def _bias_only(self, logits, reqs):  # the logit bias, sync-free; min_tokens forgotten
    rows, cols, values = _bias_entries(reqs)
    if rows:
        logits[self.upload(rows, torch.int64), self.upload(cols, torch.int64)] += self.upload(values, torch.float32)


def _young_requests(self, reqs):
    """(row, stop ids) of the requests still below min_tokens."""
    for row, request in enumerate(reqs):
        p = request.sampling
        generated = len(self.states[request.request_id].output_token_ids) - len(request.prior_output_token_ids)
        if p.stop_token_ids and generated < p.min_tokens:
            yield row, list(p.stop_token_ids)


def _min_tokens_only(self, logits, reqs):  # min_tokens, sync-free; the bias forgotten
    for row, stop in _young_requests(self, reqs):
        logits[self.upload([row] * len(stop), torch.int64), self.upload(stop, torch.int64)] = self.upload(
            [float("-inf")] * len(stop), torch.float32)


def _scalar_value(self, logits, reqs):  # both features, but the ban's value is a Python float
    _bias_only(self, logits, reqs)
    for row, stop in _young_requests(self, reqs):
        logits[self.upload([row] * len(stop), torch.int64), self.upload(stop, torch.int64)] = float("-inf")


def _history_scan(self, logits, reqs):
    for request in reqs:  # counts the real tokens by walking the whole history: O(output length) per step
        _ = sum(1 for t in self.states[request.request_id].output_token_ids if t != -1)
    solution("clean_runner")()._apply_sampling_extras(self, logits, reqs)


def _walks_history_for_min_tokens(self, logits, reqs):  # right, sync-free, but O(output length) per step
    _bias_only(self, logits, reqs)
    for row, request in enumerate(reqs):
        p = request.sampling
        if p.stop_token_ids:  # only requests with stop tokens pay: a workload without them would miss it
            history = self.states[request.request_id].output_token_ids
            generated = sum(1 for _ in history) - len(request.prior_output_token_ids)
            if generated < p.min_tokens:
                stop = list(p.stop_token_ids)
                logits[self.upload([row] * len(stop), torch.int64), self.upload(stop, torch.int64)] = self.upload(
                    [float("-inf")] * len(stop), torch.float32)


def _bias_by_python_lists(self, logits, reqs):  # both features, but the bias indexed by Python lists: uploaded, waited
    rows, cols, values = _bias_entries(reqs)
    if rows:
        logits[rows, cols] += self.upload(values, torch.float32)
    _min_tokens_only(self, logits, reqs)


def _ban_with_a_host_mask(self, logits, reqs):  # min_tokens as a host mask handed to the device's masked_fill_
    _bias_only(self, logits, reqs)
    banned = torch.zeros(logits.shape, dtype=torch.bool)  # [S, vocab] host: CUDA refuses it as a device op's mask
    for row, stop in _young_requests(self, reqs):
        banned[row, stop] = True
    logits.masked_fill_(banned, float("-inf"))


def _counts_generated_by_slicing(self, logits, reqs):  # len(hist[len(prior):]) copies every token generated so far
    _bias_only(self, logits, reqs)
    for row, request in enumerate(reqs):
        p = request.sampling
        history = self.states[request.request_id].output_token_ids
        if p.stop_token_ids and len(history[len(request.prior_output_token_ids):]) < p.min_tokens:
            stop = list(p.stop_token_ids)
            logits[self.upload([row] * len(stop), torch.int64), self.upload(stop, torch.int64)] = self.upload(
                [float("-inf")] * len(stop), torch.float32)


@pytest.mark.parametrize("overrides, failing", [
    ({"_apply_sampling_extras": _counts_generated_by_slicing}, "host work per step flat in tokens generated"),
    ({"_apply_sampling_extras": _bias_by_python_lists}, NO_STRAY),
    ({"_apply_sampling_extras": _ban_with_a_host_mask}, NO_STRAY),
    ({"_apply_sampling_extras": _min_tokens_only}, NO_STRAY),
    ({"_apply_sampling_extras": _bias_only}, NO_STRAY),
    ({"stopped_on_host": lambda self, output, requests: set()}, NO_STRAY),
    ({"_apply_sampling_extras": _scalar_value}, NO_STRAY),
    ({"_stopped_on_device": PlantedRunner._stopped_on_device,
      "stopped_on_host": PlantedRunner.stopped_on_host}, NO_STRAY),
    ({"_apply_sampling_extras": _history_scan}, "host work per step flat in output length"),
    ({"_apply_sampling_extras": _walks_history_for_min_tokens}, "host work per step flat in output length"),
], ids=["history-slice", "bias-by-python-lists", "host-mask", "drops-bias", "drops-min-tokens", "never-stops", "scalar-value", "device-stop-check", "history-scan",
        "min-tokens-history-walk"])
def test_sync_hunt_fails_on_wrong_versions(overrides, failing):
    from synclab.capstone.checks import HUNT_CHECKS
    from synclab.checks import run_checks

    intended = [check for check in HUNT_CHECKS if check.name == failing]  # the check this version must fail
    report = run_checks("6.1", intended, _variant(**overrides), seed=3)
    failed = {o.name: o for o in report.outcomes if not o.ok}
    assert failing in failed, report
    if failing.startswith("host work"):
        assert "history: " in failed[failing].got  # the failure names what grew


# ----------------------------------------------------------------------------- 6.2


def test_ablation_row_passes_on_the_solution():
    report = ch6.check_ablation_row(solution("ablation_row"), seed=1)
    assert report.passed, report


def _counts_everything_as_stray(config, workload, fixes):
    events, steps = [], []

    @contextmanager
    def counted(engine):
        with count_syncs() as report:
            yield
        events.append(report.count)

    results = ch6.run_engine(workload, config, fixes, each_step=counted)
    n = len(events)
    return {"steps": n, "tokens": sum(len(r.token_ids) for r in results.values()),
            "stray_per_step": sum(events) / n, "planned_per_step": 0.0}


def _one_block(config, workload, fixes):
    with count_syncs() as report:
        results = ch6.run_engine(workload, config, fixes)
    stray = sum(not ch6.is_planned(e) for e in report.events)
    return {"steps": 1, "tokens": sum(len(r.token_ids) for r in results.values()),
            "stray_per_step": stray, "planned_per_step": report.count - stray}


def _planned_counted_twice(config, workload, fixes):
    """Counts every wait as stray, and the planned ones as planned too."""
    row = _counts_everything_as_stray(config, workload, fixes)
    syncs, _ = ch6.step_syncs(workload, config, components=fixes)
    return {**row, "planned_per_step": sum(syncs.planned) / len(syncs.planned)}


@pytest.mark.parametrize("wrong,seed", [(_counts_everything_as_stray, 1), (_one_block, 1),
                                        *[(_planned_counted_twice, seed) for seed in (1, 2)]])
def test_ablation_row_fails_on_wrong_counts(wrong, seed):
    """On every seed: the fix the check holds back never takes the planned wait away."""
    report = ch6.check_ablation_row(wrong, seed=seed)
    assert not report.passed and report.outcomes[0].status == "failed", report
    if wrong is not _one_block:
        assert "includes the planned waits" in report.outcomes[0].message, report


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_row_that_ignores_the_fixes_it_is_handed_fails_by_name(seed):
    """6.2 counts with its third argument: a row that runs the book's fixes instead is told so, on every seed."""
    right = solution("ablation_row")

    def ignores_its_fixes(config, workload, fixes):
        return right(config, workload, ch6.book_fixes())

    report = ch6.check_ablation_row(ignores_its_fixes, seed=seed)
    assert not report.passed, report
    assert report.outcomes[0].message == "the row ignores the fixes it is handed", report
    # the hint names the engine's own call, never step_syncs (the package's count, which 6.2's check refuses)
    assert "run_engine(workload, config, fixes, each_step=" in report.outcomes[0].hint, report
    assert "what the book's fixes count" in report.outcomes[0].got, report


def test_a_row_counted_with_the_notebooks_own_fixes_is_told_so_not_about_staging_copies():
    """A row that runs the fixes the notebook loaded (a learner's labs, some exercises not written) instead of the
    ones handed in counts more stray syncs: it is told which fixes it counted, whatever the configuration."""
    from dataclasses import replace

    from synclab.capstone import workloads

    right = solution("ablation_row")
    labs = replace(ch6.book_fixes(), unfinished=frozenset({"slice_then_split", "pinned_uploads"}))

    def counts_the_notebooks(config, workload, fixes):
        return right(config, workload, labs)

    kept = list(workloads._LOADED)
    workloads._LOADED[:] = [labs]
    try:
        report = ch6.check_ablation_row(counts_the_notebooks, seed=1)
    finally:
        workloads._LOADED[:] = kept
    assert report.outcomes[0].message == "the row ignores the fixes it is handed", report
    assert "what the fixes your notebook loaded count" in report.outcomes[0].got, report


# ----------------------------------------------------------------------------- the step's timeline and the MODEL


def test_step_host_events_place_each_sync_in_its_part_of_the_step():
    workload = ch6.ablation_workload(16)
    fixes = book_fixes()
    base = ch6.step_host_events(workload, EngineConfig.baseline(), step=2, components=fixes)
    stray = [e for e in base if e.kind == "stray"]
    syncs, _ = ch6.step_syncs(workload, EngineConfig.baseline(), components=fixes)
    assert len(stray) == len(syncs.stray[2])  # the same syncs count_syncs counts per step
    # blocking uploads of inputs and of the logprobs' token ids; the device-wide wait at the end
    assert {e.phase for e in stray} == {"inputs", "sample", "copy"}
    assert all("async_tensor_h2d_baseline" in e.name for e in stray if e.phase == "inputs")

    fixed = ch6.step_host_events(workload, EngineConfig(), step=2, components=fixes)
    kinds = [e.kind for e in fixed]
    assert "stray" not in kinds and kinds.count("planned") == 1
    last_forward = max(i for i, e in enumerate(fixed) if e.phase == "forward")
    assert kinds.index("planned") > last_forward  # the wait comes after the forward is queued

    planted = ch6.step_host_events(ch6.random_mix(random.Random(1), hunt_features=True), EngineConfig(), step=2,
                                   runner_cls=PlantedRunner, components=fixes)
    assert {e.phase for e in planted if e.kind == "stray"} == {"sample"}  # all three planted syncs are in sampling
    with pytest.raises(ValueError, match="before step 99"):
        ch6.step_host_events(workload, EngineConfig(), step=99, components=fixes)


def test_modelled_busy_share():
    assert ch6.modelled_busy_share([0, 0, 0], host_us=500, device_us=1000) == pytest.approx(1.0)
    assert ch6.modelled_busy_share([0], host_us=1000, device_us=500) == pytest.approx(0.5)  # host-bound
    shares = [ch6.modelled_busy_share([k] * 4, 500, 1000) for k in (0, 1, 4, 16)]
    assert shares == sorted(shares, reverse=True) and shares[-1] < 0.7  # every stray sync costs
    mixed = ch6.modelled_busy_share([0, 8], 500, 1000)
    assert ch6.modelled_busy_share([8, 8], 500, 1000) < mixed < 1.0
    with pytest.raises(ValueError):
        ch6.modelled_busy_share([], 500, 1000)


def test_trace_lanes_keep_kernels_and_blocking_calls_in_the_window():
    from types import SimpleNamespace as NS

    def event(device, name, start, end):
        return NS(device_type=NS(name=device), name=name, time_range=NS(start=start, end=end))

    events = [event("CUDA", "gemm", 100, 150), event("CUDA", "softmax", 160, 170), event("CUDA", "late", 400, 450),
              event("CPU", "cudaStreamSynchronize", 150, 158), event("CPU", "cudaMemcpyAsync", 120, 121),
              event("CPU", "cudaMemcpy", 171, 180), event("CPU", "aten::add", 101, 102)]
    lanes = ch6.trace_lanes(events, window_us=100)
    assert lanes == {"kernels": [(0, 50), (60, 70)], "syncs": [(50, 58), (71, 80)]}
    assert ch6.trace_lanes([event("CPU", "cudaStreamSynchronize", 1, 2)], 10) == {"kernels": [], "syncs": []}
    # past a warm-up: the lanes start at the first kernel of the measured steps, not of the run
    assert ch6.trace_lanes(events, window_us=100, start_us=155) == {"kernels": [(0, 10)], "syncs": [(11, 20)]}


def test_the_figures_draw_every_configuration():
    """Seven configurations, seven traces: a figure must not drop the ones past its palette's end."""
    from synclab import figures
    from synclab.provenance import Provenance
    from synclab.timing import Sweep, Timing

    labels = [config.label for config in ch6.ablation_configs()] + ["more", "and more", "still more"]
    assert len(labels) > len(figures.VARIANT_COLORS)  # past the palette's end: colours repeat, traces stay
    counts = figures.sync_counts_figure("configuration", ["w"], {label: [1] for label in labels}, "t")
    here = Provenance.here()
    sweep = Sweep("n", [1], {label: [Timing(label, 1.0, 0.0, [1.0] * 3, here)] for label in labels}, here)
    for fig in (counts, figures.sweep_figure(sweep, "t", yaxis_title="median time per run (us)")):
        assert [trace.name for trace in fig.data] == labels
    assert fig.layout.yaxis.title.text == "median time per run (us)"


def test_load_fixes_runs_the_readers_labs_and_names_what_is_not_done(capsys, tmp_path):
    from synclab.engine.engine_core import PATTERNS
    from tests.notebook_code import ROOT

    fresh = ch6.load_fixes()  # the repository's labs are fresh: nothing written yet, so the book's fixes run
    said = capsys.readouterr().out
    assert fresh.unfinished == frozenset() and fresh.effective(EngineConfig()) == EngineConfig()
    assert said.startswith("None of chapters 1-5's fixes is written in your labs yet: the engine runs the book's "
                           "solutions") and "not done" not in said
    (tmp_path / "partly").mkdir()  # chapter 1 written, the others not: each one not written is named
    for name in ("02_lazy_streams", "03_pinned_transfers", "04_reverse_placeholder_scans", "05_list_based_caches"):
        (tmp_path / "partly" / f"{name}.ipynb").write_bytes((ROOT / "labs" / f"{name}.ipynb").read_bytes())
    (tmp_path / "partly" / "01_slice_then_split.ipynb").write_bytes(
        (ROOT / "solutions" / "01_slice_then_split.ipynb").read_bytes())
    partly = ch6.load_fixes(tmp_path / "partly")
    said = capsys.readouterr().out
    assert partly.unfinished == frozenset(PATTERNS) - {"slice_then_split"}
    assert "Exercise 3.1 is not done in " in said and "03_pinned_transfers.ipynb: the engine runs vLLM's code before " \
        "#41429" in said and "Exercises 1.1 and 1.2 are not done" not in said
    assert "runs the book's solution of 5.2" in said and "Traceback" not in said
    none_written, _ = workloads._load_fixes(ROOT / "labs", workloads._stamp(ROOT / "labs"))  # as they would run
    assert none_written.unfinished == frozenset(PATTERNS)
    assert none_written.effective(EngineConfig()) == EngineConfig.baseline()  # what really runs
    fresh = none_written
    workload = ch6.ablation_workload(16)  # and it runs: nothing written, the same tokens as the book's baseline
    got = ch6.comparable(ch6.run_engine(workload, EngineConfig(), fresh))
    assert ch6.first_difference(got, ch6.comparable(ch6.run_engine(workload, EngineConfig.baseline(),
                                                                   book_fixes()))) is None
    for name in ("01_slice_then_split", "02_lazy_streams", "03_pinned_transfers", "04_reverse_placeholder_scans",
                 "05_list_based_caches"):  # a folder of finished notebooks: the reader's, run as they are
        (tmp_path / f"{name}.ipynb").write_bytes((ROOT / "solutions" / f"{name}.ipynb").read_bytes())
    finished = ch6.load_fixes(tmp_path)
    said = capsys.readouterr().out
    assert finished.unfinished == frozenset() and "not done" not in said
    assert said.startswith(f"Loaded from {tmp_path}: 1.1 and 1.2 (AllPoolNoSync), 2.1 (AsyncOutputRunner)")
    assert "it does not check them" in said  # what was loaded, and that loading is not checking
    with pytest.raises(FileNotFoundError, match="not a folder"):
        ch6.load_fixes(tmp_path / "nowhere")


def test_a_fix_not_written_is_named_in_its_configurations_label():
    from dataclasses import replace

    from synclab.capstone.workloads import book_fixes
    from synclab.engine.engine_core import EngineConfig

    fixes = replace(book_fixes(), unfinished=frozenset({"pinned_uploads"}))
    assert fixes.label_for(EngineConfig.only("pinned_uploads")) == \
        "pinned_uploads (pinned_uploads not written: runs the code before its PR)"
    assert fixes.label_for(EngineConfig.only("list_cache")) == "list_cache"
    assert "not written" in fixes.label_for(EngineConfig()) and fixes.label_for(EngineConfig.baseline()) == "baseline"


def test_a_hunt_fixed_one_hook_at_a_time_is_judged_on_its_merits():
    """The planted runner is the bug to hunt, not an answer: a subclass that fixed one hook and inherits the other
    is told which syncs are left (the planted lines), never refused for calling the planted code."""
    clean = solution("clean_runner")()
    half = lambda: type("HalfFixed", (PlantedRunner,), {"_apply_sampling_extras": clean._apply_sampling_extras})
    report = ch6.check_sync_hunt(half, seed=3)
    text = str(report)
    assert "cannot stand in" not in text, text
    stray = next(o for o in report.outcomes if o.name == NO_STRAY)
    assert stray.status == "failed" and "planted.py:" in stray.message and "_stopped_on_device" in stray.message, text


def _row_with(tokens_of, stray_of):
    def row(config, workload, fixes):
        stray, planned = [], []

        @contextmanager
        def counted(engine):
            with count_syncs() as report:
                yield
            planned.append(sum(map(ch6.is_planned, report.events)))
            stray.append(stray_of(report) - planned[-1])

        results = ch6.run_engine(workload, config, fixes, each_step=counted)
        return {"steps": len(stray), "tokens": tokens_of(results), "stray_per_step": sum(stray) / len(stray),
                "planned_per_step": sum(planned) / len(planned)}
    return row


def test_a_row_that_counts_requests_or_staging_copies_is_told_which():
    counts_requests = _row_with(len, lambda report: len(report.events))
    report = ch6.check_ablation_row(counts_requests, seed=1)
    (row,) = report.outcomes
    assert row.message == "tokens is not the number of tokens the run produced", report
    assert "you counted the requests" in row.hint, report
    counts_staging = _row_with(lambda results: sum(len(r.token_ids) for r in results.values()),
                               lambda report: len(report.events) + report.staged_count)
    report = ch6.check_ablation_row(counts_staging, seed=1)
    if not report.passed:  # the workload stages a copy in some configuration
        assert "a staging copy, report.staged, is not a sync" in report.outcomes[0].hint, report


def test_a_row_counted_in_one_block_or_with_one_reused_counter_is_told_to_count_each_step_apart():
    """Two ways to get the per-step counting wrong, each told what each_step is for: one count_syncs() around the
    whole run (the engine's setup sync then belongs to no step), and one counter entered at every step."""
    from contextlib import nullcontext

    from synclab.syncs import count_syncs

    def one_block(config, workload, fixes):
        steps = []
        with count_syncs() as report:
            results = ch6.run_engine(workload, config, fixes, each_step=lambda engine: steps.append(1) or nullcontext())
        planned = sum(map(ch6.is_planned, report.events))
        return {"steps": len(steps), "tokens": sum(len(r.token_ids) for r in results.values()),
                "stray_per_step": (len(report.events) - planned) / len(steps), "planned_per_step": planned / len(steps)}

    report = ch6.check_ablation_row(one_block, seed=1)
    assert not report.passed and "count each step in its own count_syncs() block" in report.outcomes[0].hint, report

    def one_counter(config, workload, fixes):
        counter = count_syncs()
        ch6.run_engine(workload, config, fixes, each_step=lambda engine: counter)
        return {}

    report = ch6.check_ablation_row(one_counter, seed=1)
    assert report.outcomes[0].status == "crashed" and "a new context manager for every step" in \
        report.outcomes[0].hint, report


# ----------------------------------------------------------------------------- the book's fixes, kept in the package

NOTEBOOKS = ("01_slice_then_split", "02_lazy_streams", "03_pinned_transfers", "04_reverse_placeholder_scans",
             "05_list_based_caches")


def _per_step(workload, config, fixes, runner_cls=None):
    """Each step's syncs (kind, op, bytes, planned) and the run's results: what chapter 6's checks count."""
    syncs, results = ch6.step_syncs(workload, config, runner_cls or EngineRunner, components=fixes)
    steps = [sorted((e.kind.value, e.op, e.nbytes) for e in step) for step in syncs.stray]
    return steps, syncs.planned, ch6.comparable(results)


def _workloads():
    yield "ablation_workload(16)", ch6.ablation_workload(16), None
    yield "random_mix(0)", ch6.random_mix(random.Random(0)), None
    yield "6.1's hunt mix, planted runner", ch6.random_mix(random.Random(1), hunt_features=True), PlantedRunner


def test_the_packages_book_fixes_count_and_compute_as_the_solutions_do():
    """book_fixes() (the package's copies) against load_fixes("solutions") (the notebooks): every configuration of
    chapter 6's workloads, step by step, and 6.1's host work per decode step."""
    from synclab.capstone.chapter_fixes import BOOK_FIXES

    book, solutions = book_fixes(), ch6.load_fixes("solutions", quiet=True)
    assert all(getattr(book, f).__module__ == "synclab.capstone.chapter_fixes" for f in BOOK_FIXES)  # no notebook
    assert all(getattr(solutions, f) is not getattr(book, f) for f in BOOK_FIXES)
    assert book.unfinished == solutions.unfinished == frozenset()
    for name, workload, runner_cls in _workloads():
        for config in ch6.ablation_configs():
            got = _per_step(workload, config, book, runner_cls)
            want = _per_step(workload, config, solutions, runner_cls)
            assert got[0] == want[0], f"{name}, {config.label}: stray syncs per step"
            assert got[1] == want[1], f"{name}, {config.label}: planned waits per step"
            assert ch6.first_difference(got[2], want[2]) is None, f"{name}, {config.label}: results"
    for config in (EngineConfig(), EngineConfig.baseline()):
        for output_len, images in ((16, 2), (256, 2), (16, 16)):
            got = ch6.host_work_in_decode_step(EngineRunner, config, output_len, images, book, hunt_features=True)
            want = ch6.host_work_in_decode_step(EngineRunner, config, output_len, images, solutions,
                                                hunt_features=True)
            assert (got.total, got.torch_calls, got.history) == (want.total, want.torch_calls, want.history), \
                (config.label, output_len, images)


def _without_solutions(tmp_path, monkeypatch):
    """From here on, a repository root with no solutions/ (a learner's install); any notebook read there refused."""
    import nbformat

    from dataclasses import replace

    from synclab.capstone import workloads
    from synclab.lab import notebook_code

    root = tmp_path / "install"
    (root / "labs").mkdir(parents=True)
    read = nbformat.read

    def refusing(path, *args, **kwargs):
        assert "solutions" not in Path(path).parts, f"read {path}: a learner's install has no solutions/"
        return read(path, *args, **kwargs)

    monkeypatch.setattr(workloads, "ROOT", root)
    monkeypatch.setattr(notebook_code, "ROOT", root)
    monkeypatch.setattr(nbformat, "read", refusing)
    monkeypatch.setattr(workloads, "_LOADED", [])  # what this test loads is not what later tests run
    return root


def test_chapter_6s_checks_run_without_a_solutions_folder(tmp_path, monkeypatch, capsys):
    from synclab.capstone.chapter_fixes import BOOK_FIXES
    from synclab.lab import notebook_code

    clean_runner, ablation_row = solution("clean_runner"), solution("ablation_row")  # the reader's, loaded first
    root = _without_solutions(tmp_path, monkeypatch)
    assert not (root / "solutions").exists()
    syncs, results = ch6.step_syncs(ch6.ablation_workload(16), EngineConfig(), components=book_fixes())
    assert sum(map(len, syncs.stray)) == 0 and all(r.token_ids or r.embedding is not None for r in results.values())
    assert ch6.check_sync_hunt(clean_runner, seed=3).passed  # 6.1 and 6.2 run book_fixes() themselves
    assert ch6.check_ablation_row(ablation_row, seed=1).passed
    fixes = ch6.load_fixes("solutions")  # the lab's comment says it runs the book's: here too
    assert all(getattr(fixes, f) is BOOK_FIXES[f] for f in BOOK_FIXES) and fixes.unfinished == frozenset()
    assert capsys.readouterr().out.startswith("No solutions/ in this install: the engine runs the book's solutions")
    with pytest.raises(AssertionError, match="has no solutions/"):  # a read of solutions/ (the old book_fixes) fails
        notebook_code.load_function("solutions/05_list_based_caches.ipynb", "EncoderScheduler")


def test_a_lab_without_5_2_runs_the_packages_scheduler_not_solutions(tmp_path, monkeypatch, capsys):
    from synclab.capstone.chapter_fixes import BOOK_FIXES
    from tests.notebook_code import ROOT

    labs = _without_solutions(tmp_path, monkeypatch) / "labs"
    for name in NOTEBOOKS:  # 1-4 written; chapter 5 fresh (5.1 and 5.2 not done)
        source = ROOT / ("labs" if name.startswith("05") else "solutions") / f"{name}.ipynb"
        (labs / f"{name}.ipynb").write_bytes(source.read_bytes())
    fixes = ch6.load_fixes("labs")
    said = capsys.readouterr().out
    assert fixes.scheduler is BOOK_FIXES["scheduler"] and fixes.unfinished == frozenset({"list_cache"})
    assert ("Exercise 5.2 is not done in labs/05_list_based_caches.ipynb: the engine needs a scheduler, so it runs "
            "the book's solution of 5.2 (the package's own copy) until yours is written") in said
    assert "solutions" not in said
    workload = ch6.ablation_workload(16)
    got = ch6.comparable(ch6.run_engine(workload, EngineConfig(), fixes))
    assert ch6.first_difference(got, ch6.comparable(ch6.run_engine(workload, EngineConfig(), book_fixes()))) is None


def _with_the_labs_cell(notebook_name: str, defines: str, folder):
    """The solution notebook, with the cell defining ``defines`` as the lab has it (its stub): one exercise undone."""
    import nbformat

    from tests.notebook_code import ROOT

    solution = nbformat.read(ROOT / "solutions" / f"{notebook_name}.ipynb", as_version=4)
    lab = nbformat.read(ROOT / "labs" / f"{notebook_name}.ipynb", as_version=4)
    pattern = re.compile(rf"^(class|def) {defines}\b", re.M)
    stub = next(c.source for c in lab.cells if c.cell_type == "code" and pattern.search(c.source))
    for cell in solution.cells:
        if cell.cell_type == "code" and pattern.search(cell.source):
            cell.source = stub
    nbformat.write(solution, folder / f"{notebook_name}.ipynb")


def test_a_stretch_left_undone_is_named_as_one_and_the_books_runs_in_its_place(tmp_path, capsys):
    from tests.notebook_code import ROOT

    for name in ("02_lazy_streams", "04_reverse_placeholder_scans", "05_list_based_caches"):
        (tmp_path / f"{name}.ipynb").write_bytes((ROOT / "solutions" / f"{name}.ipynb").read_bytes())
    _with_the_labs_cell("01_slice_then_split", "AllPoolNoSync", tmp_path)  # 1.1 done, the stretch 1.2 not
    _with_the_labs_cell("03_pinned_transfers", "_apply_bad_words_single_batch", tmp_path)  # 3.8, a stretch
    fixes = ch6.load_fixes(tmp_path)
    said = capsys.readouterr().out
    assert fixes.unfinished == frozenset(), said  # every fix stays on
    assert f"Exercise 1.2 (a stretch) is not done in {tmp_path / '01_slice_then_split.ipynb'}" in said, said
    assert "Exercise 3.8 (a stretch) is not done" in said and "Exercises 1.1 and 1.2 are not done" not in said, said
    assert fixes.all_pool is ch6.book_fixes().all_pool
    assert fixes.bad_words_single_batch is ch6.book_fixes().bad_words_single_batch
    syncs, _ = ch6.step_syncs(ch6.ablation_workload(16), EngineConfig(), components=fixes)
    assert syncs.stray_per_step == 0, syncs.first_stray()


def test_a_fix_that_breaks_the_engine_is_named_with_its_exercise_not_an_engine_traceback():
    from dataclasses import replace

    from synclab.capstone.workloads import FixBrokeTheEngine

    book = ch6.book_fixes()

    class OffByOneRange(book.placeholder_range):  # a 5.1 whose embeds count is one short: the engine's shapes break
        def get_num_embeds(self) -> int:
            return super().get_num_embeds() - 1

    mine = replace(book, placeholder_range=OffByOneRange)
    with pytest.raises(FixBrokeTheEngine, match=r"your Exercise 5\.1 \(ListCachedRange\) breaks the engine") as raised:
        ch6.run_engine(ch6.ablation_workload(16), EngineConfig(), mine)
    assert "chapter 5's check cells" in str(raised.value)
    with pytest.raises(Exception) as plain:  # the book's fixes and a broken runner: nothing to blame on a chapter
        class Broken(EngineRunner):
            def execute_model(self, *args, **kwargs):
                raise ValueError("a runner's own bug")
        ch6.run_engine(ch6.ablation_workload(16), EngineConfig(), book, runner_cls=Broken)
    assert not isinstance(plain.value, FixBrokeTheEngine)


def test_load_fixes_finds_a_course_folder_with_a_folder_per_chapter(tmp_path, capsys):
    from synclab.lab.chapters import CHAPTERS
    from synclab.capstone.workloads import NOTEBOOKS as STEMS
    from tests.notebook_code import ROOT

    assert all(CHAPTERS[f"ch{n}"] == stem for n, stem in STEMS.items())  # the chapter folders' names
    for n, name in enumerate(NOTEBOOKS, start=1):  # as nbgrader hands them out: ch1/01_..., ch5/05_...
        (tmp_path / f"ch{n}").mkdir()
        (tmp_path / f"ch{n}" / f"{name}.ipynb").write_bytes((ROOT / "solutions" / f"{name}.ipynb").read_bytes())
    fixes = ch6.load_fixes(tmp_path)
    said = capsys.readouterr().out
    assert fixes.unfinished == frozenset() and "not done" not in said
    assert said.startswith(f"Loaded from {tmp_path}: 1.1 and 1.2 (AllPoolNoSync), 2.1 (AsyncOutputRunner)")
    assert fixes.all_pool.__name__ == "AllPoolNoSync" and fixes.scheduler.__name__ == "EncoderScheduler"
    workload = ch6.ablation_workload(16)
    assert _per_step(workload, EngineConfig(), fixes) == _per_step(workload, EngineConfig(), book_fixes())

    # a chapter not written yet is named where it is, in its chapter's folder
    (tmp_path / "ch3" / "03_pinned_transfers.ipynb").write_bytes((ROOT / "labs" / "03_pinned_transfers.ipynb")
                                                                  .read_bytes())
    fixes = ch6.load_fixes(tmp_path)
    said = capsys.readouterr().out
    assert fixes.unfinished == frozenset({"pinned_uploads"})
    assert f"Exercise 3.1 is not done in {tmp_path / 'ch3' / '03_pinned_transfers.ipynb'}" in said
    # a chapter not handed in (nor autograded) yet is treated as not done, and said so
    (tmp_path / "ch3" / "03_pinned_transfers.ipynb").unlink()
    (tmp_path / "ch5" / "05_list_based_caches.ipynb").unlink()
    fixes = ch6.load_fixes(tmp_path)
    said = capsys.readouterr().out
    assert fixes.unfinished == frozenset({"pinned_uploads", "list_cache"})
    assert f"Exercise 3.1 is not in {tmp_path}: no 03_pinned_transfers.ipynb there (nor in {tmp_path / 'ch3'})" \
        in said
    assert f"Exercise 5.2 is not in {tmp_path}: no 05_list_based_caches.ipynb there" in said
    assert fixes.scheduler is book_fixes().scheduler and "5.2 (EncoderScheduler)" not in said
    for n in range(1, 6):  # a folder that holds none of them is the wrong folder
        for notebook in (tmp_path / f"ch{n}").glob("*.ipynb"):
            notebook.unlink()
    with pytest.raises(FileNotFoundError, match="holds none of chapters 1-5's notebooks"):
        ch6.load_fixes(tmp_path)


CELL_FILE = "/tmp/ipykernel_4242/1234567890.py"  # where ipykernel compiles a cell: outside synclab and tests/


def _cell(source: str, **names):
    import textwrap

    from synclab.capstone import chapter_fixes
    from synclab.engine import pooler

    namespace = {"chapter_fixes": chapter_fixes, "pooler": pooler, **names}
    exec(compile(textwrap.dedent(source), CELL_FILE, "exec"), namespace)
    return namespace


@pytest.mark.parametrize("check_name, source, name, called", [
    ("check_all_pool", """
        class AllPool(pooler.TokenPoolingMethod):
            def split_hidden_states(self, hidden_states, cursor):
                return chapter_fixes._AllPoolReference.split_hidden_states(self, hidden_states, cursor)

            def forward(self, hidden_states, pooling_metadata):
                return chapter_fixes._AllPoolReference.forward(self, hidden_states, pooling_metadata)
     """, "AllPool", "_AllPoolReference."),
    ("check_all_pool_no_sync", """
        class AllPoolNoSync(AllPool):
            receives_group_rows = True

            def split_hidden_states(self, hidden_states, cursor):
                return chapter_fixes._AllPoolNoSyncReference.split_hidden_states(self, hidden_states, cursor)
     """, "AllPoolNoSync", "_AllPoolNoSyncReference.split_hidden_states"),
], ids=["1.1", "1.2"])
def test_a_reader_who_delegates_chapter_1_to_the_book_fixes_is_refused(check_name, source, name, called):
    """As tests/test_answer_keys.py's delegations: a cell that calls the package's fix fails 1.1's or 1.2's checks."""
    from synclab import slice_then_split as ch1

    extra = {"AllPool": load_function("solutions/01_slice_then_split.ipynb", "AllPool")}
    report = getattr(ch1, check_name)(_cell(source, **extra)[name], seed=0)
    failed = [o for o in report.outcomes if o.status == "failed"]
    assert not report.passed and not [o for o in report.outcomes if o.ok], str(report)
    assert [o for o in failed if "cannot stand in for your code" in o.message and called in o.message], str(report)


def test_every_book_fix_is_an_answer_kept_from_the_readers_code():
    from synclab import slice_then_split as ch1
    from synclab.answer_keys import AnswerKeyRefused, answer_in, checking
    from synclab.capstone.chapter_fixes import BOOK_FIXES
    from synclab.capstone.workloads import FIXES

    for field, _, _, exercises, _, _ in FIXES:
        task = exercises.split(" and ")[-1]
        assert answer_in(BOOK_FIXES[field], task) is not None, field  # handed in, or inherited: caught by name
    report = ch1.check_all_pool_no_sync(BOOK_FIXES["all_pool"], seed=0)
    assert not report.passed and "were handed" in report.outcomes[0].message, str(report)
    with pytest.raises(AnswerKeyRefused, match="_AllPoolNoSyncReference.split_hidden_states"):  # outside any check
        _cell("rows = chapter_fixes._AllPoolNoSyncReference(False).split_hidden_states(h, cursor)", h=None,
              cursor=None)
    with checking("3.1"), pytest.raises(AnswerKeyRefused, match="_async_tensor_h2d_reference"):  # its own checks
        _cell("x = chapter_fixes._async_tensor_h2d_reference([1, 2], 'cpu')")
    with checking("6.1"):  # a collaborator while chapter 6's checks run: the reader's hook may upload through it
        assert _cell("x = chapter_fixes._async_tensor_h2d_reference([1, 2], 'cpu')")["x"].tolist() == [1, 2]


def test_a_readers_runner_runs_on_the_book_fixes_outside_the_checks_too():
    """The lab's hunt cell runs the book's fixes with a runner: the reader's own runner, whose hooks upload through
    the engine (the book's 3.1), runs there as it did on the notebooks' fixes."""
    import nbformat

    from tests.notebook_code import ROOT

    notebook = nbformat.read(ROOT / SOLUTION, as_version=4)
    source = next(c.source for c in notebook.cells if c.cell_type == "code" and "def clean_runner" in c.source)
    imports = ("import torch\nfrom synclab.capstone import PlantedRunner\n"
               "from synclab.engine.engine_core import EngineOutput, EngineRequest\n")
    namespace = _cell(imports + source + "\nsyncs, _ = ch6.step_syncs(mix, config, clean_runner(), components=fixes)\n",
                      ch6=ch6, mix=ch6.random_mix(random.Random(1), hunt_features=True), config=EngineConfig(),
                      fixes=book_fixes())
    assert namespace["syncs"].stray_per_step == 0


def test_the_host_work_table_has_the_shape_the_page_says():
    """Chapter 6's page: the reverse scan flat in output length, the list cache flat in images, all five flat in
    both; the sync fixes leave the host's work as it was or add a few calls."""
    from synclab.capstone.profiling import HOST_WORK_POINTS

    assert HOST_WORK_POINTS == ((16, 2), (256, 2), (16, 16), (256, 16))  # short/long output, few/many images
    table = ch6.book_host_work()
    base = table["baseline"]
    assert base[1] > 2 * base[0] and base[2] > base[0]  # grows with the output's length and with the images
    scan, cache, every = table["reverse_scan"], table["list_cache"], table["all fixes"]
    assert scan[0] == scan[1] and scan[2] == scan[3] and scan[2] > scan[0]  # flat in length, not in images
    assert cache[0] == cache[2] and cache[1] == cache[3] and cache[1] > cache[0]  # flat in images, not in length
    assert len(set(every)) == 1 and every[0] < min(base)
    for sync_fix in ("slice_then_split", "lazy_stream", "pinned_uploads"):
        assert all(0 <= mine - theirs <= 20 for mine, theirs in zip(table[sync_fix], base)), (sync_fix, table)


def test_the_first_count_says_which_syncs_come_from_a_chapter_not_written_yet():
    """A learner with 1.2 missing saw "0.29 stray syncs per step" and nothing saying whose: each source is named."""
    from dataclasses import replace

    from synclab.capstone.workloads import stray_sources, sync_pattern

    fixes = replace(ch6.book_fixes(), unfinished=frozenset({"slice_then_split"}))
    syncs, _ = ch6.step_syncs(ch6.ablation_workload(16), EngineConfig(), components=fixes)
    assert syncs.stray_per_step > 0
    lines = stray_sources(syncs, fixes)
    assert len(lines) == 1 and "chapter 1's pattern (slice_then_split): its fix is not written yet" in lines[0], lines
    assert lines[0].startswith(f"{syncs.stray_per_step:.2f} per step"), lines
    # the baseline: every sync is one of the three sync patterns', each named as switched off
    base, _ = ch6.step_syncs(ch6.ablation_workload(16), EngineConfig.baseline(), components=ch6.book_fixes())
    assert {sync_pattern(e) for step in base.stray for e in step} == {"slice_then_split", "lazy_stream",
                                                                       "pinned_uploads"}
    assert all("runs the code before its fix" in line for line in stray_sources(base, ch6.book_fixes()))
    # the planted runner's own syncs are the hunt's, not a chapter's
    hunt, _ = ch6.step_syncs(ch6.random_mix(random.Random(1), hunt_features=True), EngineConfig(), PlantedRunner,
                             components=ch6.book_fixes())
    assert [line for line in stray_sources(hunt, ch6.book_fixes()) if "what 6.1 hunts" in line], hunt.first_stray()


def test_the_ablation_counts_are_ordered_as_the_fixes_predict_and_a_wrong_fix_breaks_the_order():
    """Chapter 6's CPU ablation: counted per decode step of the capstone's workload, with their spread."""
    from dataclasses import replace

    counts = ch6.book_ablation_counts()
    assert ch6.ablation_order_problems(counts) == []
    assert set(counts) == {c.label for c in ch6.ablation_configs()}
    assert all(len(v) >= 5 for row in counts.values() for v in row.values())  # a spread over several steps
    fig = ch6.ablation_counts_figure(counts, "t")
    assert len(fig.data) == 3 * len(counts)  # three panels, one bar per configuration each
    # a "reverse scan" that still scans from the front cuts nothing: the order names it
    from synclab.engine.input_batch_baseline import InputBatchBaseline

    class ForwardScan(ch6.book_fixes().input_batch):
        update_async_output_token_ids = InputBatchBaseline.update_async_output_token_ids

    wrong = ch6.ablation_counts(ch6.capstone_workload(), components=replace(ch6.book_fixes(), input_batch=ForwardScan))
    assert any(p.startswith("history elements read per step: reverse_scan alone") for p in
               ch6.ablation_order_problems(wrong)), ch6.ablation_order_problems(wrong)


def test_the_capstone_workload_pools_in_every_step_and_fits_the_gpu_model():
    from synclab.engine.tiny_llm import GPU_MODEL
    from synclab.capstone.profiling import GPU_ABLATION_STEPS, GPU_ABLATION_WARMUP

    steps = GPU_ABLATION_STEPS + GPU_ABLATION_WARMUP
    workload = ch6.capstone_workload(decode_tokens=steps, model=GPU_MODEL)
    # 60,000 tokens in: a sliding window, and only the last known token of each request computed again
    assert workload.model.sliding_window and workload.model.max_model_len <= GPU_MODEL.max_model_len
    assert all(s.computed_tokens == len(s.prompt_token_ids) + len(s.prior_output_token_ids) - 1
               for s in workload.requests if s.sampling is not None)
    assert workload.scheduler.max_num_seqs <= GPU_MODEL.max_num_seqs
    pooled = []

    class Watch(EngineRunner):
        def _pool(self, hidden_states, layout):
            out = super()._pool(hidden_states, layout)
            pooled.append(len(out))
            return out

    small = ch6.capstone_workload(decode_tokens=6)
    ch6.run_engine(small, EngineConfig(), ch6.book_fixes(), Watch)
    assert pooled[:6] == [1] * 6  # one embedding request pooled per step, beside the decodes


def _gpu_result(**tokens_per_s):
    configs = {label.replace("_all", "all fixes"): {"tokens_per_s_runs": runs, "tokens_per_s": sorted(runs)[2],
                                                    "idle_share": idle, "idle_share_windows": [idle] * 5}
               for label, (runs, idle) in tokens_per_s.items()}
    return {"configs": configs}


def test_the_gpu_ablation_claims_need_the_scan_and_all_five_beyond_the_baselines_spread():
    from synclab.capstone.profiling import gpu_ablation_problems

    base = ([100, 104, 98, 101, 99], 0.5)
    good = _gpu_result(baseline=base, pinned_uploads=([120, 121, 119, 122, 118], 0.4),
                       reverse_scan=([110, 111, 109, 112, 108], 0.45), _all=([150, 151, 149, 152, 148], 0.1))
    assert gpu_ablation_problems(good) == []
    within = _gpu_result(baseline=base, reverse_scan=([103, 100, 99, 101, 102], 0.5), _all=([150] * 5, 0.1))
    assert ["reverse_scan alone" in p for p in gpu_ablation_problems(within)] == [True]
    flat = _gpu_result(baseline=base, reverse_scan=([150] * 5, 0.4), _all=([103, 100, 99, 101, 102], 0.1))
    assert any(p.startswith("all fixes: median 101 tok/s, not above every baseline run") for p in
               gpu_ablation_problems(flat))
    # a fix whose part of the host's step is smaller than the spread need only not lose (the list cache on a GPU's
    # host), and so need the sync fixes: the other syncs still make the device wait in every step
    level = _gpu_result(baseline=base, lazy_stream=([101, 99, 100, 102, 98], 0.5),
                        list_cache=([103, 97, 105, 100, 99], 0.5), _all=([150] * 5, 0.1))
    assert gpu_ablation_problems(level) == []
    loses = _gpu_result(baseline=base, lazy_stream=([90, 91, 92, 89, 93], 0.5), _all=([150] * 5, 0.1))
    assert ["lazy_stream alone" in p and "below every baseline run" in p for p in gpu_ablation_problems(loses)] == [True]
    # all five against one alone: within the spread is level (the first H200 run), below every run loses
    close = _gpu_result(baseline=base, reverse_scan=([142, 150, 148, 153, 155], 0.4), _all=([147, 151, 144, 164, 143], 0.1))
    assert gpu_ablation_problems(close) == []
    below = _gpu_result(baseline=base, pinned_uploads=([120] * 5, 0.4), _all=([115] * 5, 0.1))
    assert any(p.startswith("all fixes: median 115 tok/s, below every run of pinned_uploads") for p in
               gpu_ablation_problems(below))
    idle = _gpu_result(baseline=base, pinned_uploads=([120] * 5, 0.4), _all=([150] * 5, 0.6))
    assert any("idle share does not fall" in p for p in gpu_ablation_problems(idle))
    assert ch6.gpu_ablation() is None  # the simulated device: no GPU ablation, no record


def test_the_first_gpu_ablation_is_kept_apart_with_what_it_contradicted():
    """The H200's run contradicted the claim it was run under (the list cache alone beyond the spread, all five above
    every run of the scan alone); it is kept as ``ablation_contradicted``, with those problems, never as the
    figure a claim validated."""
    import json

    from tests.notebook_code import ROOT

    stored = json.loads((ROOT / "data" / "reference" / "nvidia-h200" / "ch6.json").read_text())["results"]
    assert "ablation" not in stored and not stored["ablation_contradicted"]["claims"]["holds"]
    said = stored["ablation_contradicted"]["claims"]["problems"]
    assert [p.split(":")[0] for p in said] == ["all fixes", "list_cache alone"], said


def test_a_profiled_run_records_its_window_of_steps_and_no_more(monkeypatch):
    """The GPU ablation's profiled run: the profiler starts at the first measured step, marks it, and stops (the
    device drained first) after its steps, or where the run ended first; profiling all 110 steps of the 8B-like model
    cost 60-65 s a configuration on the H200."""
    from types import SimpleNamespace

    import torch

    from synclab.capstone.profiling import _ProfiledWindow

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("drain"))
    prof = SimpleNamespace(start=lambda: calls.append("start"), stop=lambda: calls.append("stop"))
    window = _ProfiledWindow(start=3, steps=4, prof=prof)
    marks = []
    for step in range(10):
        with window(SimpleNamespace(steps=step)) as mark:
            marks.append((step, mark))
    window.close()  # after the run: nothing left to stop
    assert calls == ["start", "drain", "stop"]
    assert window.started is not None and [step for step, mark in marks if mark is not None] == [3]
    short = _ProfiledWindow(start=3, steps=40, prof=prof)  # a run that ends inside the window
    calls.clear()
    for step in range(5):
        with short(SimpleNamespace(steps=step)):
            pass
    assert calls == ["start"]
    short.close()
    assert calls == ["start", "drain", "stop"]



@pytest.mark.cuda
def test_the_gpu_ablation_runs_its_protocol_on_a_gpu():
    from synclab.capstone.profiling import gpu_ablation_problems

    result = ch6.gpu_ablation(configs=[EngineConfig.baseline(), EngineConfig.only("pinned_uploads"), EngineConfig()],
                              steps=20, repeats=2, warmup=3)
    assert set(result["configs"]) == {"baseline", "pinned_uploads", "all fixes"}
    for row in result["configs"].values():
        assert len(row["tokens_per_s_runs"]) == 2 and all(r > 0 for r in row["tokens_per_s_runs"])
        assert len(row["idle_share_windows"]) == 5 and all(0 <= s <= 1 for s in row["idle_share_windows"])
    assert result["claims"]["problems"] == gpu_ablation_problems(result)


READING = {"removes_most_syncs": "pinned_uploads", "removes_no_syncs": ["list_cache", "reverse_scan"],
           "cuts_history_reads": "reverse_scan", "cuts_torch_calls": "list_cache",
           "saving_grows_with": {"reverse_scan": "output length", "list_cache": "images"}, "one_fix_alone": "B"}


def test_reading_the_ablation_passes_on_the_solution_and_earns_a_share_per_right_answer():
    assert ch6.check_ablation_reading(solution("my_reading")).passed
    assert ch6.check_ablation_reading(lambda: READING).passed  # a list for the set, an upper-case letter
    wrong = dict(READING, removes_most_syncs="lazy_stream",
                 saving_grows_with={"reverse_scan": "images", "list_cache": "images"})
    report = ch6.check_ablation_reading(lambda: wrong)
    (result,) = report.outcomes
    assert not report.passed and result.earned == pytest.approx(result.points * 4 / 6, abs=1e-3)
    assert "removes_most_syncs: you said 'lazy_stream', but per step" in result.message
    missing = ch6.check_ablation_reading(lambda: {k: v for k, v in READING.items() if k != "one_fix_alone"})
    assert "missing: one_fix_alone" in missing.outcomes[0].got
    as_tuple = ch6.check_ablation_reading(lambda: dict(READING, saving_grows_with=("output length", "images")))
    assert "saving_grows_with: the format: a dict keyed by the two fixes" in as_tuple.outcomes[0].message
    unnamed = ch6.check_ablation_reading(lambda: dict(READING, cuts_torch_calls="the list cache"))
    assert "cuts_torch_calls: name a fix by its pattern" in unnamed.outcomes[0].message
    assert unnamed.outcomes[0].earned == pytest.approx(unnamed.outcomes[0].points * 5 / 6, abs=1e-3)  # that one only
    spelled = ch6.check_ablation_reading(lambda: dict(READING, removes_most_syncs="Pinned uploads",
                                                      cuts_torch_calls="list-cache"))
    assert spelled.passed, spelled  # a fix's name as a reader writes it is that fix


def test_the_stored_reading_is_the_reading_measured_again():
    """data/expected/6.3.json (what a students' install holds in place of the reading it does not ship) is what
    `python -m synclab expected` writes: the reading of the counts, measured here again."""
    import json

    from synclab.answer_keys.plain_data import decode, digest
    from synclab.capstone import checks as c6

    stored = json.loads((Path(__file__).resolve().parent.parent / "data" / "expected" / "6.3.json").read_text())
    reading = stored["answers"]["synclab.capstone.checks:_measured_reading"][digest({})]
    assert decode(reading) == c6._measured_reading(), "data/expected/6.3.json is stale: run python -m synclab expected"


def test_the_pages_model_sentence_holds_on_the_stored_model():
    """Chapter 6's page says what the MODEL shows at 2 ms of device work: checked on the figure the solution stored,
    which the counted syncs and the measured host time of that run drew."""
    import json

    from synclab.claims import stored_figures

    page = " ".join((Path(__file__).parents[1] / "book" / "06_capstone_engine_step.md").read_text().split())
    said = ("at 2 ms of device work per step, a sync fix alone barely moves the busy share: a step with any stray sync "
            "left waits for the device's queue to drain, so 3 stray syncs cost about what 12 do. The reverse scan alone "
            "moves it most of any one fix. In the model only all five keep the device busy all the time, and only just: "
            "their host step is {:.1f} ms without the network's compute ({:.1f} ms with it, in the CPU fold), a little "
            "under the 2 ms")
    cells = json.loads((Path(__file__).parents[1] / SOLUTION).read_text())["cells"]

    def printed(containing: str) -> str:  # the stored printout of the solution's cell that printed ``containing``
        return next(text for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])
                    if containing in (text := "".join(o.get("text", ""))))

    host_ms = float(re.search(r"all fixes \(host ([\d.]+) ms\)", printed("all fixes (host")).group(1))  # the MODEL's
    table = printed("= step")
    row = re.search(r"^all fixes\s+(.*)$", table, re.M).group(1).split()  # the CPU fold's table: parts, then the step
    step_ms = float(row[-1].replace(",", "")) / 1000
    model_ms = float(row[2].replace(",", "")) / 1000  # the network's compute, the part the MODEL leaves out
    assert abs(step_ms - model_ms - host_ms) < 0.06  # the two printouts agree
    assert said.format(host_ms, step_ms) in page and 0.75 < host_ms / 2 < 1  # under the device's 2 ms, by a quarter
    figure, measured = stored_figures(Path(__file__).parents[1] / SOLUTION)["ch6_busy_model"]
    assert measured is not None and measured.claim["holds"]  # drawn from the measured host time, claim-checked
    at_2ms = figure["data"][1]  # the slider's second step: DEVICE_STEPS_US[1]
    assert "2 ms" in str(figure["layout"]["sliders"][0]["steps"][1]["label"])
    share = dict(zip((x.split("<br>")[0] for x in at_2ms["x"]), at_2ms["y"]))
    base, every = share.pop("baseline"), share.pop("all fixes")
    assert every >= 0.99 and all(every > s for s in share.values())
    assert max(share, key=share.get) == "reverse_scan"
    for sync_fix in ("slice_then_split", "lazy_stream", "pinned_uploads"):
        assert abs(share[sync_fix] - base) < 0.05, (sync_fix, share[sync_fix], base)
    counts, _ = stored_figures(Path(__file__).parents[1] / SOLUTION)["ch6_ablation_counts"]
    stray = {t["name"]: t["y"][0] for t in counts["data"] if t.get("yaxis") == "y"}  # the first panel: stray syncs
    assert (stray["pinned_uploads"], stray["baseline"]) == (3, 12)  # "3 stray syncs cost about what 12 do"
    assert share["reverse_scan"] - base > 0.1


def test_verified_checks_witness_what_a_right_answer_does_whatever_else_is_wrong():
    """The grader verifies 6.1's outputs check and 6.3's reading by their witnesses against the right answers' on
    the same seed: a runner that scans the history (the flat-work check names that) has the right tokens, and so
    the same witness; a reading written another way (a list for the set, an upper-case letter) reads the same."""
    from synclab.capstone.checks import HUNT_CHECKS
    from synclab.checks import run_checks

    first = [check for check in HUNT_CHECKS if check.name == NO_STRAY]
    right = run_checks("6.1", first, solution("clean_runner"), seed=3).outcomes[0]
    scans = run_checks("6.1", first, _variant(_apply_sampling_extras=_history_scan), seed=3).outcomes[0]
    assert right.ok and scans.ok and witness(right) and witness(scans) == witness(right)
    read = ch6.check_ablation_reading(solution("my_reading")).outcomes[0]
    written_otherwise = ch6.check_ablation_reading(lambda: READING).outcomes[0]
    assert witness(read) and witness(written_otherwise) == witness(read)


def test_the_gpu_ablation_runs_an_8b_like_model_where_it_fits_and_says_which():
    """On a GPU the capstone's model is sized to the device: a Llama-8B-like shape in bf16 (6.7 B parameters, a decode
    step reading 12.5 GiB of weights) on a card of 40 GiB or more, half its width and layers below; the bench stores
    the shape it ran and the CPU's. The CPU keeps its small float32 model."""
    from synclab.capstone.profiling import model_shape
    from synclab.engine.tiny_llm import CPU_MODEL, LLAMA_8B_LIKE, SMALL_GPU_MODEL, gpu_model

    assert gpu_model(141 * 2**30) is LLAMA_8B_LIKE and gpu_model(80 * 2**30) is LLAMA_8B_LIKE
    assert gpu_model(24 * 2**30) is SMALL_GPU_MODEL
    shape = model_shape(LLAMA_8B_LIKE)
    assert (shape["hidden_size"], shape["num_layers"], shape["dtype"]) == (4096, 32, "bfloat16")
    assert 6.5e9 < shape["parameters"] < 7e9 and shape["weight_bytes"] == 2 * shape["parameters"]
    assert model_shape(CPU_MODEL)["dtype"] == "float32"


def test_a_bf16_model_runs_the_capstone_engine_and_computes_what_its_configurations_agree_on():
    """The bf16 path (the GPU model's dtype) on the host, at the CPU model's size: weights, KV cache and image
    embeddings in bf16, logits in float32; every configuration computes the same tokens, as in float32."""
    from dataclasses import replace

    import torch

    from synclab.engine.tiny_llm import CPU_MODEL

    model = replace(CPU_MODEL, dtype=torch.bfloat16)
    workload = ch6.capstone_workload(decode_tokens=2, model=model)
    results = [ch6.comparable(ch6.run_engine(workload, config, ch6.book_fixes()))
               for config in (EngineConfig.baseline(), EngineConfig())]
    assert results[0] == results[1] and results[0]


def test_a_reading_written_as_the_cell_and_the_figures_word_it_is_right():
    """6.3's options are printed "b) ..." and the host-work figure's axis says "images per request": answers in
    those words mean what the reading means, and earn what it earns."""
    worded = {**READING, "one_fix_alone": "b)",
              "saving_grows_with": {"reverse_scan": "Output length", "list_cache": "images per request"}}
    assert ch6.check_ablation_reading(lambda: worded).passed
    assert not ch6.check_ablation_reading(lambda: {**worded, "one_fix_alone": "c)"}).passed


def _clean_runner_edited(old: str, new: str):
    """The solution's clean_runner with ``old`` replaced by ``new`` in its source: a learner's version off in one
    place."""
    import nbformat

    from tests.notebook_code import ROOT

    source = next(c.source for c in nbformat.read(ROOT / SOLUTION, as_version=4).cells
                  if "### BEGIN SOLUTION 6.1" in c.source)
    assert old in source, old
    namespace = dict(vars(ch6))
    namespace.update({"torch": __import__("torch"), "PlantedRunner": ch6.PlantedRunner})
    exec(source.replace(old, new), namespace)
    return namespace["clean_runner"]


@pytest.mark.parametrize("seed", range(4))
def test_a_min_tokens_count_off_by_one_fails_on_every_seed(seed):
    """The stop rule's boundary is a fixed case (ch6.min_tokens_mix), not a draw the random mixes reach one time in
    eight: a count one token off stops a request a token early or late there, whatever the seed."""
    off_by_one = _clean_runner_edited("- len(request.prior_output_token_ids)", "- len(request.prior_output_token_ids) + 1")
    report = ch6.check_sync_hunt(off_by_one, seed=seed)
    first = report.outcomes[0]
    assert first.status == "failed" and "differ" in first.message, str(report)
    assert "min_tokens" in first.hint and "keep every feature" not in first.hint, first.hint  # the stop's boundary


def test_a_dropped_bias_with_no_min_tokens_is_told_to_look_at_the_bias():
    """A learner's 6.1 that dropped the logit bias drew a request with min_tokens 0 and a stop token: the same tokens,
    other logprobs from position 0 on, and the hint blamed min_tokens' boundary. A bias moves the logprobs step after
    step, a ban one token off only at the boundary: the hint now tells them apart."""
    from types import SimpleNamespace

    from synclab.capstone.checks import _feature_hint

    spec = SimpleNamespace(request_id="r", sampling=SimpleNamespace(stop_token_ids=(5,), min_tokens=0))
    want = {"r": ([1, 2, 3], [-1.0, -2.0, -3.0])}
    bias_dropped = {"r": ([1, 2, 3], [-1.5, -2.5, -3.5])}  # every position moved
    banned_at_zero = {"r": ([1, 2, 3], [-1.5, -2.0, -3.0])}  # `<=`: the stop token banned at position 0 alone
    assert "look at the logit bias" in _feature_hint(spec, bias_dropped, want)
    assert "min_tokens' boundary (0)" in _feature_hint(spec, banned_at_zero, want)


def test_the_books_fixes_asked_for_by_default_read_the_counts_counted_once():
    """A lab with none of chapters 1-5 written runs the book's fixes: its counts are the book's, read from the counts
    the package keeps per version of its code, not counted again."""
    assert ch6.host_work_table(components=book_fixes()) == ch6.book_host_work()
    assert ch6.ablation_counts(components=book_fixes()) == ch6.book_ablation_counts()
    assert ch6.host_work_table(components=book_fixes()) is not ch6.host_work_table(components=book_fixes())  # copies


def test_the_planned_wait_sits_in_the_placeholder_repair_whenever_a_request_decodes_again(monkeypatch):
    """The pattern's sentence: step k waits in chapter 4's repair when a request of step k-1 decodes again, bad words
    or not (the engine's sampler reads the history every step); a learner stripped the bad words and still found the
    waits there. Only the last step, which queues no forward, waits when it collects the output."""
    import dataclasses
    import traceback

    import synclab.engine.engine_core as engine_core
    from synclab.capstone.workloads import decode_workload, run_engine

    waited_in: list[str] = []
    for event_class in (engine_core._ReadyEvent, engine_core._OutputCopyEvent):
        def synchronize(self, _original=event_class.synchronize):
            if not self.waited:  # the frames that asked: the repair, or collecting the output
                names = [frame.name for frame in traceback.extract_stack()]
                waited_in.append("repair" if "update_async_output_token_ids" in names else
                                 "collect" if "get_output" in names else "elsewhere")
            return _original(self)
        monkeypatch.setattr(event_class, "synchronize", synchronize)
    for bad_words in (True, False):
        waited_in.clear()
        workload = decode_workload(16, 0)
        if not bad_words:
            workload = dataclasses.replace(workload, requests=tuple(
                dataclasses.replace(r, sampling=dataclasses.replace(r.sampling, bad_words=())) for r in workload.requests))
        assert all(r.sampling.bad_words for r in workload.requests) == bad_words
        run_engine(workload, EngineConfig(), book_fixes())
        assert waited_in[-1] == "collect" and set(waited_in[:-1]) == {"repair"} and len(waited_in) > 2, waited_in
