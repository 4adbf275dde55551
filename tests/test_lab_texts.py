"""The labs say what a learner needs, and what they say agrees with the code (issue: text gaps a learner tripped on).

Each test reads the generated lab (what the learner reads) and checks a sentence against the thing it describes.
"""

from __future__ import annotations

import functools
import inspect
import re

import nbformat
import torch

from synclab.answer_keys import unguarded
from synclab.device import to_device
from synclab.syncs import count_syncs
from tests.notebook_code import ROOT
import pytest

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def markdown(lab: str) -> list[str]:
    nb = nbformat.read(ROOT / "labs" / f"{lab}.ipynb", as_version=4)
    return [cell.source for cell in nb.cells if cell.cell_type == "markdown"]


def section(lab: str, heading: str) -> str:
    """The markdown cell that starts with ``heading``."""
    (found,) = [text for text in markdown(lab) if text.startswith(heading)]
    return " ".join(found.split())


def test_chapter_3_says_a_non_blocking_download_gets_a_pinned_destination_and_the_counter_agrees():
    page = " ".join((ROOT / "book" / "03_pinned_transfers.md").read_text().split())
    assert '`x.to("cpu", non_blocking=True)` returns at once, into a pinned buffer' in page
    on_device = to_device(torch.arange(4))
    with count_syncs() as report:  # what the sentence implies: the call itself does not wait
        on_device.to("cpu", non_blocking=True)
    assert report.count == 0
    chapter_2 = " ".join((ROOT / "book" / "02_lazy_streams.md").read_text().split())
    assert "chapter 3 covers pinning" not in chapter_2 and "Exercise 3.6 and its pitfalls" in chapter_2


def test_chapter_2_says_what_host_blocked_measures_before_it_runs():
    nb = nbformat.read(ROOT / "labs" / "02_lazy_streams.ipynb", as_version=4)
    (at,) = [i for i, cell in enumerate(nb.cells) if "ch2.host_blocked(" in cell.source]
    before = nb.cells[at - 1]
    assert before.cell_type == "markdown" and "`ch2.host_blocked`" in before.source
    assert "_sync_device()" in before.source and "get_output()" in before.source


def test_5_2_states_the_clamp_to_the_item():
    text = section("05_list_based_caches", "## Exercise 5.2")
    assert "clamped to the item" in text
    assert "`window_end = num_computed_tokens + num_new_tokens`" in text
    assert "`start = max(0, num_computed_tokens - pos.offset)`" in text
    assert "`end = min(pos.length, window_end - pos.offset)`" in text


def test_5_2_states_the_return_with_no_new_tokens_and_the_reference_agrees():
    """The contract's first clause (a learner failed one run in six without it): the arguments back, the cache untouched."""
    from synclab.engine.scheduler import SchedulerConfig
    from synclab.list_caches.checks import _PlaceholderRangeReference, _SchedulerReference, _manager_state, \
        _pre_cache, make_request

    text = section("05_list_based_caches", "## Exercise 5.2")
    assert ("When `num_new_tokens` is 0, or the request has no multimodal items, return "
            "`([], num_new_tokens, encoder_compute_budget)` at once") in text
    assert "without asking any item or the encoder cache anything" in text
    scheduler = _SchedulerReference(SchedulerConfig())
    request = make_request(_PlaceholderRangeReference, [("img-a", 10, 8, None)], 40, num_computed_tokens=12)
    _pre_cache(scheduler, request, [0])  # a hit the loop would record if it asked
    before = _manager_state(scheduler)
    assert tuple(scheduler._try_schedule_encoder_inputs(request, 12, 0, 7)) == ([], 0, 7)
    assert _manager_state(scheduler) == before


def test_6_1_names_the_hooks_it_overrides_and_defines_stray_and_per_step():
    from synclab.engine.engine_core import EngineRunner

    hunt = " ".join(text for text in markdown("06_capstone_engine_step") if "`CleanRunner`" in text)
    lab = nbformat.read(ROOT / "labs" / "06_capstone_engine_step.ipynb", as_version=4)
    stub = next(c.source for c in lab.cells if c.cell_type == "code" and "def clean_runner" in c.source)
    assert "one method per hook of the base runner" in " ".join(hunt.split())
    for hook in ("_apply_sampling_extras", "_stopped_on_device", "stopped_on_host"):  # the stub lays each one out
        assert f"def {hook}(" in stub and callable(getattr(EngineRunner, hook))
    assert stub.count('raise NotImplementedError("Exercise 6.1")') == 3  # the reader's: what crosses, then each stop hook
    assert "A **stray** sync is any sync outside `gpu_sync_allowed()`" in " ".join(hunt.split())
    ablation = section("06_capstone_engine_step", "## Exercise 6.2")
    assert '"Per step" is an average: the run\'s total divided by its number of steps' in ablation


def _statements(source: str) -> list[str]:
    lines = [line.split("#")[0].strip() for line in source.splitlines()]
    return [line for line in lines if line and not line.startswith(("def ", '"""'))]


def test_the_primers_copy_of_the_baseline_is_the_whole_function():
    from synclab import primer

    text = next(t for t in markdown("00_primer") if t.startswith("## Where the syncs hide"))
    (block,) = re.findall(r"```python\n(.*?)```", text, re.S)
    assert "..." not in block
    body = inspect.getsource(unguarded(primer.decode_step_baseline)).split('"""')[2]  # after the docstring
    assert _statements(block) == _statements(body)


def test_the_primers_gpu_speedups_are_the_stored_runs():
    """The page's GPU numbers: the baseline's median over the solution's, at 1, 16 and 256 requests, over the stored
    runs of the H100 and H200 machines, rounded as the page rounds them."""
    import json

    page = " ".join((ROOT / "book" / "00_primer.md").read_text().split())
    speedups: dict[int, list[float]] = {1: [], 16: [], 256: []}
    paths = sorted((ROOT / "data" / "reference").glob("*/ch0.json"))
    assert [p.parent.name for p in paths] == ["nvidia-h100-80gb-hbm3", "nvidia-h200"]
    for path in paths:
        timing = json.loads(path.read_text())["results"]["timing"]
        medians = {v: [t["median_us"] for t in timing["timings"][v]] for v in ("baseline", "decode_step (0.1)")}
        for n in speedups:
            at = timing["values"].index(n)
            speedups[n].append(medians["baseline"][at] / medians["decode_step (0.1)"][at])
    at_1, at_16, at_256 = (sorted(speedups[n]) for n in (1, 16, 256))
    assert (f"on the H100 and the H200 it is {at_16[0]:.1f}–{at_16[1]:.1f}× faster at 16 requests and "
            f"{at_256[0]:.0f}–{at_256[1]:.0f}× at 256") in page
    assert f"At one request it is slower ({at_1[0]:.2f}–{at_1[1]:.2f}×)" in page and at_1[1] < 1


def test_1_1_names_the_flag_and_the_device_indices_it_reads():
    from synclab.engine.pooler_baseline import AllPoolBaseline

    text = section("01_slice_then_split", "## Exercise 1.1")
    assert "`self.enable_chunked_prefill`" in text
    text = section("01_slice_then_split", "**Stuck on 1.1?**")
    assert AllPoolBaseline(enable_chunked_prefill=True).enable_chunked_prefill is True
    # the hints' second rung names them (the contract leaves the plan to the reader)
    assert ("the first entry of `first_token_indices_gpu` and the last of `last_token_indices_gpu`"
            in " ".join(text.split())) and "not on the data" in text


def test_chapter_1_explains_the_sub_group_of_1_with_the_calls_it_counts():
    from synclab import slice_then_split as ch1
    from synclab.engine.pooler_baseline import AllPoolBaseline
    from tests.notebook_code import load_function

    all_pool = load_function("solutions/01_slice_then_split.ipynb", "AllPool", {})
    calls = ch1.torch_call_counts({"baseline": AllPoolBaseline, "1.1": all_pool}, group_sizes=(1, 8, 32))
    text = section("01_slice_then_split", "**Why #41163 is slower than the baseline at a sub-group of 1.**")
    assert f"the baseline dispatches {calls['baseline'][0]}" in text
    assert f"#41163 dispatches {calls['1.1'][0]}" in text
    assert f"{calls['baseline'][0]} at 1, {calls['baseline'][1]} at 8" in text
    assert f"({calls['baseline'][2]} calls against {calls['1.1'][2]})" in text


def test_chapter_2s_page_states_the_models_own_costs_and_numbers():
    """Every MODEL number on chapter 2's page comes from the one function its figures draw (``ch2.model_run``)."""
    from synclab.lazy_streams import profiling as ch2

    page = " ".join((ROOT / "book" / "02_lazy_streams.md").read_text().split())
    assert "ch2.opening_model_figure()" in page  # the opening picture is the same model
    assert (f"{ch2.MODEL_HOST_US:g} us for the host to queue a step, {ch2.MODEL_LAUNCH_US:g} us to launch it, a "
            f"{ch2.MODEL_FORWARD_US:g} us forward and a {ch2.MODEL_COPY_US:g} us output copy") in page
    before = ch2.model_run(wait_in_step=True, wait_in_get_output=False)
    after = ch2.model_run(wait_in_step=False, wait_in_get_output=True)
    assert f"a step takes {before.steady_step_us:g} us, and the host waits {before.steady_host_wait_us:g} us of it" in page
    assert (f"once the loop is full a step takes {after.steady_step_us:g} us "
            f"({before.steady_step_us / after.steady_step_us:g}× at these illustrative costs), and the host waits "
            f"{after.steady_host_wait_us:g} us "
            "of it") in page
    assert "about as long in both" not in page  # the model says otherwise: 90 us against 30 us


def test_chapter_2s_waits_fold_states_each_gpus_host_time_and_wait_as_stored():
    """The GPUs' waits fold: the host's own time (step less wait) and the wait, before and after, on each GPU, as the
    stored host_blocked runs hold them (a learner found the old sentence's explanation did not fit opposite signs)."""
    import json

    page = " ".join((ROOT / "book" / "02_lazy_streams.md").read_text().split())
    own, wait = {}, {}
    for slug, name in (("nvidia-h100-80gb-hbm3", "H100"), ("nvidia-h200", "H200")):
        runs = json.loads((ROOT / "data" / "reference" / slug / "ch2.json").read_text())["results"]["host_blocked"]
        before, after = runs["results"].values()
        own[name] = [r["step_us"] - r["host_waiting_us"] for r in (before, after)]
        wait[name] = [r["host_waiting_us"] for r in (before, after)]
    assert own["H100"][1] < own["H100"][0] and own["H200"][1] > own["H200"][0]  # opposite ways, as the page says
    assert (f"with the fix it fell from {own['H100'][0]:.0f} to {own['H100'][1]:.0f} µs on the H100 and rose from "
            f"{own['H200'][0]:.0f} to {own['H200'][1]:.0f} µs on the H200, so the wait rose on the one "
            f"({wait['H100'][0]:.0f} → {wait['H100'][1]:.0f} µs) and fell on the other ({wait['H200'][0]:.0f} → "
            f"{wait['H200'][1]:.0f} µs)") in page


def test_chapter_4s_page_states_the_h200s_real_loop_as_stored():
    """The real loop's step on the H200 (``gpu_loop``), each number of the page's sentence from the stored run."""
    import json

    page = " ".join((ROOT / "book" / "04_reverse_placeholder_scans.md").read_text().split())
    run = json.loads((ROOT / "data" / "reference" / "nvidia-h200" / "ch4.json").read_text())
    loop = run["results"]["gpu_loop"]
    at = {n: i for i, n in enumerate(loop["lengths"])}
    forward, reverse = loop["ms_per_step"]["forward (before #42938)"], loop["ms_per_step"]["reverse (4.1)"]
    device = [ms for runs in loop["device_ms_per_step"].values() for ms in runs]
    assert loop["num_reqs"] == 128 and f"torch {run['provenance']['torch_version']}" in page
    assert f"a real loop of 128 requests whose forward keeps the device busy {min(device):.1f} ms" in page
    assert max(device) < 1.0  # "0.8 ms": every forward's own time rounds near it (0.81-0.93 ms)
    assert (f"took {forward[at[10_000]]:.1f} ms a step at 10,000 tokens out and {forward[at[60_000]]:.0f} ms at 60,000 "
            f"with the forward scan; with the reverse scan, {reverse[at[10_000]]:.2f} and {reverse[at[60_000]]:.1f} ms"
            in page)
    assert f"({loop['pr_tpot_ms']['before #42938']:.0f} → {loop['pr_tpot_ms']['after']:.0f} ms)" in page
    # a learner's question: the loop's whole step under the sweep's repair alone; the page says both, and the spread
    sweep = run["results"]["cost_sweep"]
    alone_ms = sweep["timings"][sweep["variants"][0]][sweep["values"].index(60_000)]["median_us"] / 1000
    low, high = loop["ms_per_step_range"]["forward (before #42938)"][at[60_000]]
    assert forward[at[60_000]] < alone_ms < high  # under the sweep's median, within the loop's own spread
    assert (f"(The loop's {forward[at[60_000]]:.0f} ms is under the {alone_ms:.0f} ms the sweep above gave the repair "
            f"alone at 60,000: two runs, and the same scan's time on this host moved that much within one, from "
            f"{low:.0f} to {high:.0f} ms over the loop's three rounds.)") in page


def test_chapter_4s_page_states_the_scans_costs_that_were_stored():
    """The scan's cost at the PR's shape, on the stored run's CPU and on the GPU machines' hosts, as stored."""
    import json

    from synclab import reverse_scan as ch4
    from synclab.engine.input_batch_baseline import InputBatchBaseline

    page = " ".join((ROOT / "book" / "04_reverse_placeholder_scans.md").read_text().split())
    # the PR's 128 requests: each request's repair reads the same elements (counted for one and two, which must agree)
    one, two = (ch4.elements_touched(InputBatchBaseline, 60_000, num_reqs=n) for n in (1, 2))
    assert two == 2 * one
    elements = ch4.PROFILE_REQS * one
    assert f"({ch4.PROFILE_REQS} requests, 60,000 tokens each) the lab's scan reads {elements:,} elements" in page
    solution = (ROOT / "solutions" / "04_reverse_placeholder_scans.ipynb").read_text()
    assert f"the page's {elements:,} is for {ch4.PROFILE_REQS}: {ch4.PROFILE_REQS // 16} times these" in solution
    cpu_us = float(re.search(r"60000\s+([\d.]+) us", solution).group(1))
    assert f"about {cpu_us / 1000:.0f} ms on the book's CPU" in page
    # "matching the PR's whole 65 ms step" (the PR's TPOT before the fix): within a tenth of it, or above
    assert cpu_us > 0.9 * 65_000 and "the lab's scan matching the PR's whole 65 ms step" in page
    model_tps = ch4.PROFILE_REQS * 1e6 / max(cpu_us, 10_000.0)  # the loop model at 60,000 tokens, a 10 ms device step
    assert abs(model_tps / 1_937 - 1) < 0.1 and "passes near the PR's 1,937 mark" in page
    assert f"(about {round(model_tps, -2):,.0f} tokens/s at 60,000 tokens)" in page
    gpu_ms = sorted(round(next(t["median_us"] for t in json.loads(path.read_text())["results"]["cost_sweep"]["timings"]
                                ["forward (before #42938)"] if t["label"].endswith("=60000")) / 1000)
                    for path in [*(ROOT / "data" / "reference").glob("*/ch4.json"),  # second runs too: the page's
                                 *(ROOT / "data" / "reference").glob("*/repeat/ch4.json")])  # table shows them
    assert f"{gpu_ms[0]}–{gpu_ms[-1]} ms on the GPU machines' hosts" in page
    # History: "a sixth to a tenth of the lab's 65–109 ms"; the main flow: "6–10× less"
    low, high = round(cpu_us / 1000), gpu_ms[-1]
    assert f"lab's {low}–{high} ms" in page and f"{low / 10.9:.0f}–{high / 10.9:.0f}× less" in page


def test_chapter_2s_gpu_waits_and_steps_are_the_stored_runs():
    """The page reads the two GPUs' host_blocked rows: each number it states is the stored run's, rounded."""
    import json

    page = " ".join((ROOT / "book" / "02_lazy_streams.md").read_text().split())
    stored = {}
    for gpu in ("nvidia-h100-80gb-hbm3", "nvidia-h200"):
        rows = json.loads((ROOT / "data" / "reference" / gpu / "ch2.json").read_text())["results"]["host_blocked"]
        stored[gpu] = (rows["results"]["sync (before #39113)"], rows["results"]["async (2.1)"])
        assert (f"the tables headed \"{rows['num_reqs']} requests per step\", under the figure: the medians of "
                f"{rows['repeats']} runs of {rows['steps']} steps at {rows['num_reqs']} requests. The figure, the loop "
                "sweep, is the H100's alone"
                ) in page
    loops = {gpu for gpu in stored if "loop" in json.loads((ROOT / "data" / "reference" / gpu / "ch2.json").read_text())
             ["results"]}
    assert loops == {"nvidia-h100-80gb-hbm3"}  # "The figure, the loop sweep, is the H100's alone"
    (h100_before, h100_after), (h200_before, h200_after) = stored.values()
    # the waits: test_chapter_2s_waits_fold_states_each_gpus_host_time_and_wait_as_stored
    steps = (f"({h100_before['step_us']:,.0f} → {h100_after['step_us']:,.0f} µs; "
             f"{h200_before['step_us']:,.0f} → {h200_after['step_us']:,.0f})")
    assert steps in page, steps
    for before, after in stored.values():  # "8% shorter on both"
        assert round(100 * (1 - after["step_us"] / before["step_us"])) == 8


def test_chapter_3s_measured_gpu_speed_ups_are_the_stored_runs():
    import json

    page = " ".join((ROOT / "book" / "03_pinned_transfers.md").read_text().split())
    said, one_request = [], []
    for gpu, name in (("nvidia-h100-80gb-hbm3", "H100"), ("nvidia-h200", "H200")):
        sweep = json.loads((ROOT / "data" / "reference" / gpu / "ch3.json").read_text())["results"]["gather_sweep"]
        before = [t["median_us"] for t in sweep["timings"]["before #41429"]]
        after = [t["median_us"] for t in sweep["timings"]["after (3.2)"]]
        ratios = [b / a for n, b, a in zip(sweep["values"], before, after) if n >= 16]
        said.append(f"{min(ratios):.1f}× to {max(ratios):.1f}× on the {name}")
        one_request += [times[sweep["values"].index(1)] for times in (before, after)]
    repeat = json.loads((ROOT / "data" / "reference" / "nvidia-h200" / "repeat" / "ch3.json").read_text())
    sweep = repeat["results"]["gather_sweep"]
    ratios = [b / a for n, b, a in zip(sweep["values"], *(
        [t["median_us"] for t in sweep["timings"][v]] for v in ("before #41429", "after (3.2)"))) if n >= 16]
    said[1] += f" (a second H200 run: {min(ratios):.1f}× to {max(ratios):.1f}×)"
    assert f"Measured from 16 requests up: {said[0]}, {said[1]}." in page, said
    # "a one-request call takes 156 to 264 µs (both versions, both GPUs)": the four stored medians at 1 request
    assert len(one_request) == 4
    span = f"a one-request call takes {min(one_request):.0f} to {max(one_request):.0f} µs (both versions, both GPUs)"
    assert span in page, span
    # "to 4.9 ms at 256 requests on the H100 (4.3 ms on the H200), with no sync": the new version's largest batch
    at_256 = [json.loads((ROOT / "data" / "reference" / gpu / "ch3.json").read_text())["results"]["gather_sweep"]
              for gpu in ("nvidia-h100-80gb-hbm3", "nvidia-h200")]
    ms = [sweep["timings"]["after (3.2)"][sweep["values"].index(256)]["median_us"] / 1000 for sweep in at_256]
    assert f"to {ms[0]:.1f} ms at 256 requests on the H100 ({ms[1]:.1f} ms on the H200), with no sync" in page, ms


def test_chapter_6s_gpu_ablation_sentences_are_the_stored_run():
    """Every number the page states of the H200's ablation is the stored run's, rounded as the page rounds it."""
    import json
    import statistics

    from synclab.capstone.profiling import GPU_ABLATION_CLAIM, gpu_ablation_problems
    from synclab.capstone.workloads import capstone_workload
    from synclab.engine.tiny_llm import GPU_MODEL

    page = " ".join((ROOT / "book" / "06_capstone_engine_step.md").read_text().split())
    stored = json.loads((ROOT / "data" / "reference" / "nvidia-h200" / "ch6.json").read_text())["results"]
    run = stored["ablation_contradicted"]
    configs = run["configs"]
    base = configs["baseline"]
    ratio = {label: c["tokens_per_s"] / base["tokens_per_s"] for label, c in configs.items()}
    assert (f"The reverse scan alone served {ratio['reverse_scan']:.1f}× the baseline's tokens per second and all five "
            f"fixes {ratio['all fixes']:.1f}×") in page
    # "all five were no faster than the scan alone (1,467 tokens per second against 1,482)"
    every, scan = configs["all fixes"]["tokens_per_s"], configs["reverse_scan"]["tokens_per_s"]
    assert every <= scan
    fastest = max(configs["reverse_scan"]["tokens_per_s_runs"])  # the run the stored problem names
    assert (f"all five were no faster than the scan alone ({every:,.0f} tokens per second against {scan:,.0f}; the "
            f"scan's fastest of five runs: {fastest:,.0f})" in page)
    assert f"({fastest:,.0f})" in " ".join(run["claims"]["problems"])
    # host time and tokens per second part: the scan alone's and all five's runs, as stored
    spans = {label: (min(configs[label]["tokens_per_s_runs"]), max(configs[label]["tokens_per_s_runs"]))
             for label in ("reverse_scan", "all fixes")}
    assert spans["all fixes"][0] <= spans["reverse_scan"][1]  # they overlap
    assert ("their tokens per second overlapped (five runs each: {:,.0f}–{:,.0f} for the scan alone, "
            "{:,.0f}–{:,.0f} for all five), so that 9% did not show".format(*spans["reverse_scan"],
                                                                            *spans["all fixes"])) in page
    assert "Every other fix alone stayed within the baseline's five runs" in page
    for label in set(configs) - {"baseline", "reverse_scan", "all fixes"}:
        assert min(base["tokens_per_s_runs"]) <= configs[label]["tokens_per_s"] <= max(base["tokens_per_s_runs"])
    assert (f"The device idled {base['idle_share']:.0%} of the time in the baseline, and "
            f"{configs['all fixes']['idle_share']:.0%} with all five fixes") in page
    # the run's shape and its model, as stored: "100 steps after a warm-up, in five interleaved runs, with a model of
    # hidden size 1,024 and 8 layers"
    assert run["steps"] == 100 and run["repeats"] == 5 and all(len(c["tokens_per_s_runs"]) == 5 for c in configs.values())
    model = dict(re.findall(r"(\w+)=(\w+)", run["model"]))
    assert (f"decoded {run['steps']} steps after a warm-up, in five interleaved runs, with a model of hidden size "
            f"{int(model['hidden_size']):,} and {model['num_layers']} layers") in page
    # the host's parts were timed with the small model (no model stored with them: host_time_by_phase's default)
    from synclab.engine.tiny_llm import CPU_MODEL

    assert "model_shape" not in stored["host_phases"]
    small = f"hidden {CPU_MODEL.hidden_size}, {CPU_MODEL.num_layers} layers"
    assert f"with the lab's small model ({small})" in page
    assert f"timed with the small model ({small}), not the model of the tokens per second" in page
    # the device's work per step: its busy share of a step, the step from tokens per second and the requests sampled
    generating = sum(s.sampling is not None for s in capstone_workload(decode_tokens=1, model=GPU_MODEL).requests)
    step_ms = {label: 1000 * generating / c["tokens_per_s"] for label, c in configs.items()}
    busy_ms = [(1 - c["idle_share"]) * step_ms[label] for label, c in configs.items()]
    assert all(0.75 <= b <= 1.25 for b in busy_ms), busy_ms
    assert f"about 1 ms of work in {min(step_ms.values()):.0f}–{max(step_ms.values()):.0f} ms" in page
    solution = " ".join(nbformat.read(ROOT / "solutions" / "06_capstone_engine_step.ipynb", as_version=4).cells[-1]
                        .source.split())  # the takeaways say it too
    assert f"about 1 ms of work in a {min(step_ms.values()):.0f}-{max(step_ms.values()):.0f} ms step" in solution
    phases = stored["host_phases"]["phases"]["baseline"]
    step = statistics.median(phases["round_totals_us"])
    assert round(phases["per_phase_us"]["scan"] / step, 1) == 0.5  # "the scan is half of it"
    assert round(phases["per_phase_us"]["schedule"] / step, 2) == 0.05  # "the scheduler's questions a twentieth"
    host = {label: statistics.median(row["round_totals_us"]) for label, row in stored["host_phases"]["phases"].items()}
    assert (f"The H200's host measured {host['baseline'] / host['reverse_scan']:.2f}× and "
            f"{host['baseline'] / host['all fixes']:.2f}×") in page  # as the lab's table prints them
    # History: what all five add to the scan alone, on that host
    shorter = 1 - host["all fixes"] / host["reverse_scan"]
    assert (f"all five leave a host step only {shorter:.0%} shorter than the scan alone's "
            f"({host['all fixes'] / 1000:.2f} against {host['reverse_scan'] / 1000:.2f} ms)") in page  # 9%, as printed
    # the page's claim is not the one the run was made under ("a stricter claim"), and agrees with what it drew
    assert f"The next run's claim: {GPU_ABLATION_CLAIM}" in page and run["claims"]["text"] != GPU_ABLATION_CLAIM
    assert gpu_ablation_problems(run) == []


# ----------------------------------------------------------------------------- no exercise spec names a PR

_EXERCISE = re.compile(r"^## Exercise (?P<task>\d+\.\d+)\b", re.MULTILINE)
_PR_NUMBER = re.compile(r"#(\d{4,6})\b")


def exercise_specs(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Each exercise's spec as the learner reads it: the markdown from its ``## Exercise N.M`` heading (where it
    starts inside a cell, from there) to its check cell, the contract, the hints and what the check drives. A
    code cell on the way (a demo, the answer cell) is not the spec; a new ``## `` section ends it."""
    from synclab.lab.notebook_cells import chapter_of, check_cell_task

    chapter = chapter_of(nb)
    specs: dict[str, str] = {}
    task = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = _EXERCISE.search(cell.source)
            if heading:
                task = heading.group("task")
                specs[task] = cell.source[heading.start():]
            elif cell.source.startswith("## "):
                task = None
            elif task is not None:
                specs[task] += "\n\n" + cell.source
        elif task is not None and check_cell_task(cell, chapter) == task:
            task = None
    return specs


def prs_in_specs(nb: nbformat.NotebookNode) -> dict[str, list[str]]:
    """The PR numbers each exercise's spec names, by task (none: not listed)."""
    return {task: ["#" + n for n in found] for task, text in exercise_specs(nb).items()
            if (found := _PR_NUMBER.findall(text))}


def test_no_exercise_spec_in_a_lab_names_a_pr():
    """A spec states the contract in terms of the code ("before the fix", "vLLM after the change"); the PR belongs to
    the chapter's page and its History fold. Stretches included."""
    from synclab.lab.exercises import EXERCISES

    found, seen = {}, set()
    for path in sorted((ROOT / "labs").glob("0*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        seen |= set(exercise_specs(nb))
        if named := prs_in_specs(nb):
            found[path.name] = named
    assert seen == set(EXERCISES), f"specs not found for {sorted(set(EXERCISES) - seen)}"
    assert not found, f"exercise specs name PRs: {found}"


def test_a_pr_in_a_spec_is_caught_and_a_variant_label_or_a_profile_is_not():
    cells = [nbformat.v4.new_markdown_cell("# 9 · A lab\n\nPR #41163 is the chapter's PR."),
             nbformat.v4.new_markdown_cell("Some setup.\n\n## Exercise 1.1 — slice once\n\nWrite it as the code after "
                                           "the fix."),
             nbformat.v4.new_markdown_cell("**The buffer.** Later vLLM (since #41433) clones it."),
             nbformat.v4.new_code_cell('class AllPool:\n    raise NotImplementedError("Exercise 1.1")'),
             nbformat.v4.new_code_cell("ch1.check_all_pool(AllPool)"),
             nbformat.v4.new_markdown_cell("## Profile: what #41163 changed"),
             nbformat.v4.new_code_cell('impls = finished({"AllPool (1.1, #41163)": AllPool})')]
    nb = nbformat.v4.new_notebook(cells=cells)
    assert set(exercise_specs(nb)) == {"1.1"}
    assert exercise_specs(nb)["1.1"].startswith("## Exercise 1.1")  # the cell's text before the heading is not spec
    assert prs_in_specs(nb) == {"1.1": ["#41433"]}


def test_chapter_6s_earlier_gpu_ablations_are_the_stored_runs():
    """The earlier runs (one profiled run per configuration: the H100's, the H200's repeat), as chapter 6's section of
    the measurement appendix tells them, as stored: their workload, their wall time and each configuration's tokens
    per second against the baseline's."""
    import json

    page = " ".join((ROOT / "book" / "appendix_measurement.md").read_text().split())
    runs = {name: json.loads((ROOT / "data" / "reference" / path).read_text())["results"]["gpu_ablation"]
            for name, path in (("H100", "nvidia-h100-80gb-hbm3/ch6.json"), ("H200", "nvidia-h200/repeat/ch6.json"))}
    configs = [c for run in runs.values() for c in run["configs"].values()]
    (out,) = {run["output_length"] for run in runs.values()}
    (steps,) = {c["steps"] for c in configs}
    (tokens,) = {c["tokens"] for c in configs}
    wall_ms = [1000 * c["wall_s"] for c in configs]
    assert (f"requests resumed {out} tokens into their output, {tokens} tokens decoded in {steps} steps, the prefill "
            f"included; {min(wall_ms):.0f}–{max(wall_ms):.0f} ms a run") in page

    def change(name: str) -> dict[str, float]:
        base = runs[name]["configs"]["baseline"]["tokens_per_s"]
        return {label: c["tokens_per_s"] / base - 1
                for label, c in runs[name]["configs"].items() if label != "baseline"}

    def words(x: float) -> str:
        return f"{abs(x):.0%} {'fewer' if x < 0 else 'more'}"

    h100, h200 = change("H100"), change("H200")
    assert (f"ranged from {words(min(h100.values()))} to {words(max(h100.values()))} on the H100 and from "
            f"{words(min(h200.values()))} to {words(max(h200.values()))} on the H200") in page
    assert (f"all five fixes served {words(h100['all fixes'])} on the one and {words(h200['all fixes'])} "
            "on the other") in page
    assert min(h100, key=h100.get) == "list_cache" and sorted(h200.values())[-2] <= h200["list_cache"]
    assert "the list cache alone was the slowest on the H100 and among the fastest on the H200" in page


def _timed_checks() -> dict[str, list[str]]:
    """``{task: [check name, ...]}`` of every chapter check whose code reaches ``synclab.timing`` (or a clock):
    the check's function, what it calls in the package, the closures it wraps, followed to the end."""
    import dis
    import importlib
    import pkgutil
    import types

    from synclab import timing
    from synclab.checks import Check
    from synclab.lab.chapters import PACKAGES, REGISTRY

    clocks = {"perf_counter", "perf_counter_ns", "process_time", "thread_time"}

    def reaches_timing(fn, seen) -> bool:
        if isinstance(fn, functools.partial):
            fn = fn.func
        if not isinstance(fn, types.FunctionType) or fn in seen:
            return False
        seen.add(fn)
        if fn.__module__ == timing.__name__:
            return True
        codes, names = [fn.__code__], set()
        while codes:
            code = codes.pop()
            names |= set(code.co_names)
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            names |= {i.argval for i in dis.get_instructions(code) if i.opname == "IMPORT_NAME"}
        if timing.__name__ in names or names & clocks:
            return True
        called = [fn.__globals__.get(name) for name in names]
        called += [cell.cell_contents for cell in fn.__closure__ or () if cell.cell_contents is not None]
        called += [c.run for c in called if isinstance(c, Check)]
        return any(reaches_timing(c, seen) for c in called
                   if getattr(c, "__module__", "") and c.__module__.startswith("synclab"))

    found: dict[str, list[str]] = {}
    checks: list[Check] = []
    functions: list[types.FunctionType] = []  # where a check is made when it runs (0.2, 2.2, 3.6)
    for package in PACKAGES.values():
        module = importlib.import_module(f"{package}.checks")
        modules = [module] + [importlib.import_module(m.name) for m in
                              pkgutil.iter_modules(getattr(module, "__path__", []), f"{module.__name__}.")]
        for m in modules:
            for value in vars(m).values():
                if isinstance(value, (list, tuple)):
                    checks += [c for c in value if isinstance(c, Check)]
                elif isinstance(value, types.FunctionType) and value.__module__ == m.__name__:
                    functions.append(value)
    assert {c.task.split(".")[0] for c in checks} == {str(c.number) for c in REGISTRY}, "every chapter's checks found"
    for check in {id(c): c for c in checks}.values():
        if reaches_timing(check.run, set()):
            found.setdefault(check.task, []).append(check.name)
    timed_functions = {f"{f.__module__}.{f.__name__}" for f in functions if reaches_timing(f, set())}
    found["functions"] = sorted(timed_functions)
    return found


def test_the_instructors_page_names_the_one_check_that_times():
    """"Every check counts or compares results except one, the last of 5.1, which times": the checks' code agrees, and
    chapter 6's checks.py says "none times anything" of its own checks, which holds too."""
    from synclab.list_caches.checks import CHECKS_5_1, QUERY_RATIO_BOUND

    timed = _timed_checks()
    assert timed.pop("functions") == ["synclab.list_caches.checks._check_ratio",
                                      "synclab.list_caches.checks.query_ratio",
                                      "synclab.list_caches.checks.timed_questions"]  # the runner that times, there
    assert timed == {"5.1": [CHECKS_5_1[-1].name]}, timed
    assert "timed in one run" in CHECKS_5_1[-1].name
    page = " ".join((ROOT / "book" / "instructors.md").read_text().split())
    assert ("Every check counts or compares results except one, the last of 5.1, which times: the list cache must "
            f"answer the scheduler's questions at least {QUERY_RATIO_BOUND:.0f}× faster than the tensor cache, both "
            "timed, interleaved, in one run.") in page
    assert "none times anything" not in page
    import synclab.capstone.checks as capstone_checks
    assert "Every check counts; none times anything." in capstone_checks.__doc__ and "6.1" not in timed
    assert not {task for task in timed if task.startswith("6.")}


def _task_lines_and_stub_docstrings(nb) -> list[str]:
    """What else states an exercise to the learner: the lab's opening list of tasks ("* **1.1** write ..."), and the
    docstrings of the stubs the learner fills in."""
    import ast

    found = [line for line in nb.cells[0].source.splitlines() if re.match(r"\s*\* \*\*\d\.\d\*\*", line)]
    for cell in nb.cells:
        if cell.cell_type != "code" or "NotImplementedError(\"Exercise" not in cell.source:
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node):
                found.append(ast.get_docstring(node))
    return found


def test_no_task_line_or_stub_docstring_names_a_pr():
    """The opening's list of tasks and the stubs' docstrings state the exercises too: in terms of the code, as the
    specs do (the PR is the page's)."""
    named = {path.name: hits for path in sorted((ROOT / "labs").glob("0*.ipynb"))
             if (hits := [text for text in _task_lines_and_stub_docstrings(nbformat.read(path, as_version=4))
                          if re.search(r"#\d{4,6}", text)])}
    assert not named, named
    planted = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 1\n\n* **1.1** write it as #41163 did"),
                                              nbformat.v4.new_code_cell('def f():\n    """After #39113."""\n'
                                                                        '    raise NotImplementedError("Exercise 1.1")')])
    assert len(_task_lines_and_stub_docstrings(planted)) == 2  # the test can fail


def test_chapter_1_states_its_models_step_times_as_the_model_plays_them():
    """The page's model figure: 60 us of host work against 35 us, 40 us of device work, two syncs; the page says what
    the model's subtitle shows per step, and the model agrees."""
    from synclab.timeline_model import simulate

    before, after = (round(simulate(host_us=h, device_us=40, syncs=2, steps=4).step_time_us) for h in (60, 35))
    page = " ".join((ROOT / "book" / "01_slice_then_split.md").read_text().split())
    assert "simulate(host_us=60, device_us=40, syncs=2, steps=4)" in page
    assert f"{before} us per step before, {after} us after" in page, (before, after)


def test_the_primers_cost_per_sync_is_the_stored_runs():
    """"16 to 20 us per extra sync": the baseline's time less 0.1's at 256 requests, over the 512 syncs more it makes
    (1 + 2 x 256 against 1), on each GPU's stored run (a learner found "tens of microseconds" too high)."""
    import json

    page = " ".join((ROOT / "book" / "00_primer.md").read_text().split())
    per_sync = []
    for slug in ("nvidia-h100-80gb-hbm3", "nvidia-h200"):
        timing = json.loads((ROOT / "data" / "reference" / slug / "ch0.json").read_text())["results"]["timing"]
        at = timing["values"].index(256)
        base, fix = (timing["timings"][v][at]["median_us"] for v in timing["variants"])
        per_sync.append((base - fix) / (2 * 256))
    assert (f"on the GPUs this book measured, {min(per_sync):.0f} to {max(per_sync):.0f} us per extra sync, that "
            "request's launches included") in page, per_sync


def test_chapter_1s_flat_calls_sentence_states_the_gpus_times_as_stored():
    """"Flat in calls is not flat in time": 1.1's and the baseline's medians at 8 and 48 requests on each GPU, as
    stored (a learner saw the flat call count beside a time that grows)."""
    import json

    page = " ".join((ROOT / "book" / "01_slice_then_split.md").read_text().split())
    said = {}
    for slug, name in (("nvidia-h100-80gb-hbm3", "H100"), ("nvidia-h200", "H200")):
        timing = json.loads((ROOT / "data" / "reference" / slug / "ch1.json").read_text())["results"]["timing"]
        at = [timing["values"].index(n) for n in (8, 48)]
        base, fix = (timing["timings"][v] for v in timing["variants"][:2])
        said[name] = [[round(runs[i]["median_us"]) for i in at] for runs in (fix, base)]
        assert said[name][0][1] > 2 * said[name][0][0]  # "still grows": more than twice, 8 to 48
    (h100_fix, h100_base), (h200_fix, h200_base) = said["H100"], said["H200"]
    assert (f"1.1's call still grows from {h100_fix[0]} us at 8 requests to {h100_fix[1]} us at 48 on the H100 (H200: "
            f"{h200_fix[0]} to {h200_fix[1]} us), where the baseline's grows from {h100_base[0]} to {h100_base[1]} us "
            f"(H200: {h200_base[0]} to {h200_base[1]} us)") in page


def test_chapter_1s_pr_note_states_the_stored_gpu_baselines_at_32():
    """The PR's box under chapter 1's GPU figures sets its 59.89 us beside the lab's GPU runs: the baseline's medians
    at a sub-group of 32, as stored, about twice the PR's."""
    import json

    from synclab.reference import pr_reports

    note = pr_reports()["ch1"].note
    for slug, name in (("nvidia-h200", "H200"), ("nvidia-h100-80gb-hbm3", "H100")):
        timing = json.loads((ROOT / "data" / "reference" / slug / "ch1.json").read_text())["results"]["timing"]
        at_32 = timing["timings"][timing["variants"][0]][timing["values"].index(32)]["median_us"]
        assert f"{at_32:.0f} us on the {name}" in note, (name, at_32)
        assert 1.8 < at_32 / 59.89 < 2.4  # "about half": the PR's baseline against this run's


def test_chapter_1_states_the_gpu_speedups_at_1_and_8_requests_as_stored():
    """"slower at one request (0.9×) and faster from 8 (1.1× to 1.2×)": the PR's method against the baseline in every
    stored GPU run of chapter 1 (the H100's, the H200's and its repeat), rounded to a tenth."""
    import json

    ratios: dict[int, list[float]] = {1: [], 8: [], 32: [], 48: []}
    for path in sorted((ROOT / "data" / "reference").glob("*/**/ch1.json")):
        timing = json.loads(path.read_text())["results"]["timing"]
        base, fix = (timing["timings"][timing["variants"][i]] for i in (0, 1))
        for n in ratios:
            i = timing["values"].index(n)
            ratios[n].append(base[i]["median_us"] / fix[i]["median_us"])
    assert len(ratios[1]) >= 3
    at_1 = sorted({f"{r:.1f}" for r in ratios[1]})
    low, high = (f"{f(ratios[8]):.1f}" for f in (min, max))
    low_32, high_48 = f"{min(ratios[32] + ratios[48]):.1f}", f"{max(ratios[32] + ratios[48]):.1f}"
    page = " ".join((ROOT / "book" / "01_slice_then_split.md").read_text().split())
    assert at_1 == ["0.9"] and (f"slower at one request (0.9×) and faster from 8 ({low}× to {high}×, then {low_32}× "
                                f"to {high_48}× at 32 and 48" in page), (at_1, low, high, low_32, high_48)


def test_chapter_6_says_how_many_torch_calls_a_sync_fix_adds_and_the_list_cache_saves():
    """"a pinned upload ... (7 more per step); chapter 1's split adds 3. The list cache saves 256": the book's
    counts per decode step of the capstone's workload (each the same over the steps)."""
    import statistics

    from synclab import capstone as ch6

    calls = {label: statistics.median(row["torch calls"]) for label, row in ch6.book_ablation_counts().items()}
    more = {label: round(n - calls["baseline"]) for label, n in calls.items()}
    page = " ".join((ROOT / "book" / "06_capstone_engine_step.md").read_text().split())
    assert (f"where the blocking upload was one call ({more['pinned_uploads']} more per step); chapter 1's split "
            f"adds {more['slice_then_split']}. The list cache saves {-more['list_cache']}.") in page
    assert calls["all fixes"] == calls["list_cache"] + more["pinned_uploads"] + more["slice_then_split"]


def test_chapter_6s_history_names_the_h100_run_it_does_not_draw():
    import json

    stored = json.loads((ROOT / "data" / "reference" / "nvidia-h100-80gb-hbm3" / "ch6.json").read_text())
    said = stored["provenance"]
    page = " ".join((ROOT / "book" / "06_capstone_engine_step.md").read_text().split())
    assert (f"The H100's stored run (torch {said['torch_version']}, {said['date']}) timed an older, shorter workload"
            in page)
    assert not {"ablation", "ablation_contradicted"} & set(stored["results"])  # so the lab does not draw it


def test_chapter_3s_step_of_every_site_says_its_stored_counts():
    """"a step calling them all goes from 207 to 1 at 64 requests (the one left is 3.7's read-back)": the stored
    figure's last bars, and the one sync left is the data-parallel site's."""
    import json

    page = " ".join((ROOT / "book" / "03_pinned_transfers.md").read_text().split())
    notebook = json.loads((ROOT / "solutions" / "03_pinned_transfers.ipynb").read_text())
    (figure,) = [value for cell in notebook["cells"] for output in cell.get("outputs", [])
                 if output.get("metadata", {}).get("scrapbook", {}).get("name") == "ch3_syncs"
                 for key, value in output.get("data", {}).items() if "plotly" in key]
    bars = {trace["name"]: dict(zip(trace["y"], trace["x"])) for trace in figure["data"]}  # horizontal bars
    before, after = bars["before"], bars["after"]
    step = "one step, every site"
    assert f"goes from {before[step]} to {after[step]} at 64 requests" in page
    left = [site for site, n in after.items() if n and site != step]
    assert left == ["_synchronize_dp_ranks (rank 0 of 2)"] and after[step] == 1
    assert "(the one left is 3.7's read-back)" in page


def test_chapter_6s_host_time_caption_says_the_scans_own_noise_as_stored():
    """"the scan, which no sync fix touches, moves by up to 1.4% between their rows": the stored table's scan column,
    over the baseline and the three sync fixes alone."""
    import json

    page = " ".join((ROOT / "book" / "06_capstone_engine_step.md").read_text().split())
    notebook = json.loads((ROOT / "solutions" / "06_capstone_engine_step.ipynb").read_text())
    (table,) = ["".join(o.get("text", "")) for c in notebook["cells"] if "host_time = ch6.host_time_by_phase()"
                in "".join(c["source"]) for o in c["outputs"] if "= step" in "".join(o.get("text", ""))]
    lines = table.splitlines()
    column = lines[0].split().index("scan") - 5  # the header's first five words name the rows, not a column
    scans = [float(line.split()[1 + column].replace(",", "")) for line in lines[1:]
             if line.split() and line.split()[0] in ("baseline", "slice_then_split", "lazy_stream", "pinned_uploads")]
    assert len(scans) == 4
    spread = max(scans) / min(scans) - 1
    assert f"moves by up to {spread:.1%} between their rows" in page, spread


def test_chapter_6s_gpu_host_time_caption_names_its_slow_rounds_as_stored():
    """"lazy_stream's and pinned_uploads' long whiskers: one slow round each, the fifth": the stored H200 host times,
    where a round past 1.5x its configuration's median is a slow one."""
    import json
    import statistics

    stored = json.loads((ROOT / "data" / "reference" / "nvidia-h200" / "ch6.json").read_text())
    slow = {label: [i for i, t in enumerate(row["round_totals_us"])
                    if t > 1.5 * statistics.median(row["round_totals_us"])]
            for label, row in stored["results"]["host_phases"]["phases"].items()}
    slow = {label: rounds for label, rounds in slow.items() if rounds}
    assert slow == {"lazy_stream": [4], "pinned_uploads": [4]}, slow
    page = " ".join((ROOT / "book" / "06_capstone_engine_step.md").read_text().split())
    assert "lazy_stream's and pinned_uploads' long whiskers: one slow round each, the fifth" in page
