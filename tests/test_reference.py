"""Tests for synclab.provenance and synclab.reference: a CPU run is never shown as a GPU reference."""

from __future__ import annotations

import datetime
from dataclasses import replace
import json
from pathlib import Path

import pytest
import torch

from synclab import reference
from synclab.device import has_cuda
from synclab.provenance import Provenance, cuda_version_label
from synclab.reference import BENCH_DIR_ENV, describe_missing, load, record
from synclab.lab.chapters import import_all

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

import_all()  # the chapters declare their claims when imported

H100 = Provenance(device="NVIDIA H100 80GB HBM3", is_gpu=True, torch_version="2.9.0+cu128",
                  date="2026-01-02", host="x86_64")
CPU = Provenance(device="cpu", is_gpu=False, torch_version="2.9.0+cpu", date="2026-01-02", host="x86_64")


# ----------------------------------------------------------------------------- provenance


def test_here_on_this_machine():
    prov = Provenance.here()
    assert prov.is_gpu is has_cuda()
    assert prov.device == (torch.cuda.get_device_name() if has_cuda() else "cpu")
    assert prov.torch_version == torch.__version__
    datetime.date.fromisoformat(prov.date)
    assert prov.host
    if has_cuda():  # a GPU run names its CUDA runtime and driver
        assert prov.cuda_runtime == torch.version.cuda and prov.driver
    else:
        assert prov.cuda_runtime == "" and prov.driver == ""


def test_slug():
    assert H100.slug == "nvidia-h100-80gb-hbm3"
    assert CPU.slug == "cpu"
    assert Provenance("  AMD Instinct MI300X (gfx942) ", True, "2", "d", "h").slug == "amd-instinct-mi300x-gfx942"


def test_label_says_no_gpu_on_cpu():
    assert CPU.label == "cpu (no GPU) · torch 2.9.0+cpu · 2026-01-02"
    if not has_cuda():
        assert Provenance.here().label.startswith("cpu (no GPU), ")
        assert " torch thread" in Provenance.here().label


def test_label_of_a_gpu():
    assert H100.label == "NVIDIA H100 80GB HBM3 · torch 2.9.0+cu128 · 2026-01-02"
    assert "no GPU" not in H100.label
    full = replace(H100, cuda_runtime="12.8", driver="570.86.15")
    assert full.label == "NVIDIA H100 80GB HBM3 · torch 2.9.0+cu128 · CUDA 12.8 · driver 570.86.15 · 2026-01-02"


def test_cuda_versions_read_as_people_write_them():
    assert cuda_version_label(12080) == "CUDA 12.8"
    assert cuda_version_label(13000) == "CUDA 13.0"


def test_provenance_written_before_the_cuda_fields_still_loads():
    old = {k: v for k, v in H100.to_dict().items() if k not in ("cuda_runtime", "driver")}
    assert Provenance.from_dict(old) == H100


def test_dict_round_trip():
    data = json.loads(json.dumps(H100.to_dict()))
    assert Provenance.from_dict(data) == H100
    assert Provenance.from_dict({**data, "extra": "ignored"}) == H100


# ----------------------------------------------------------------------------- record


def test_record_is_a_no_op_without_bench_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(BENCH_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    record("ch9", "timing", {"x": 1})
    assert list(tmp_path.iterdir()) == []


def test_record_is_a_no_op_with_empty_bench_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(BENCH_DIR_ENV, "")
    monkeypatch.chdir(tmp_path)
    record("ch9", "timing", {"x": 1})
    assert list(tmp_path.iterdir()) == []


def test_record_writes_results_with_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    record("ch9", "timing", {"x": 1})
    record("ch9", "counts", {"y": [1, 2]})
    record("ch9", "timing", {"x": 2})  # the same name again: replaced
    record("ch8", "other", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ch8.json", "ch9.json"]
    data = json.loads((tmp_path / "ch9.json").read_text())
    assert data["results"] == {"timing": {"x": 2}, "counts": {"y": [1, 2]}}
    prov = Provenance.from_dict(data["provenance"])
    assert (prov.device, prov.is_gpu, prov.torch_version) == ("cpu", False, torch.__version__)


# ----------------------------------------------------------------------------- load


def _write(root: Path, slug: str, chapter: str, data: dict) -> None:
    (root / slug).mkdir(parents=True, exist_ok=True)
    (root / slug / f"{chapter}.json").write_text(json.dumps(data))


def test_load_returns_gpu_references_only(tmp_path):
    gpu = {"provenance": H100.to_dict(), "results": {"timing": {"x": 1}}}
    _write(tmp_path, H100.slug, "ch9", gpu)
    _write(tmp_path, "nvidia-h200", "ch9", {"provenance": {**H100.to_dict(), "device": "NVIDIA H200"},
                                            "results": {}})
    _write(tmp_path, "cpu", "ch9", {"provenance": CPU.to_dict(), "results": {"timing": {"x": 99}}})
    _write(tmp_path, "unlabelled", "ch9", {"results": {"timing": {"x": 98}}})  # no provenance: not a reference
    _write(tmp_path, H100.slug, "ch8", gpu)  # another chapter
    found = load("ch9", root=tmp_path)
    assert list(found) == ["nvidia-h100-80gb-hbm3", "nvidia-h200"]
    assert found[H100.slug] == gpu


def test_a_recorded_cpu_run_is_never_loaded(tmp_path, monkeypatch):
    """What `bench` records on this CPU-only machine cannot come back as a reference."""
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path / Provenance.here().slug))
    (tmp_path / Provenance.here().slug).mkdir()
    record("ch9", "timing", {"x": 1})
    assert (tmp_path / "cpu" / "ch9.json").exists()
    assert load("ch9", root=tmp_path) == {}


def test_load_without_any_reference(tmp_path):
    assert load("ch9", root=tmp_path) == {}
    assert load("ch9", root=tmp_path / "missing") == {}


def test_default_reference_dir():
    assert reference.REFERENCE_DIR == Path(reference.__file__).resolve().parent.parent / "data" / "reference"


def test_describe_missing_shows_the_prs_own_numbers_and_what_a_gpu_run_adds():
    text = describe_missing("ch4")
    assert "Reported by PR #42938" in text and "1,937 tokens/s" in text and "12,178 tokens/s" in text
    assert "python -m synclab bench ch4" in text and "data/reference/<device>/ch4.json" in text
    assert "No PR measured this" in describe_missing("ch6")  # the lab's own figures say so, not an empty line
    only = describe_missing("ch3", "bandwidth")
    assert "pinned memory" in only and "gather_specific_token_logprobs" not in only


def test_a_pr_report_without_numbers_is_refused(tmp_path):
    bad = tmp_path / "reports.yaml"
    bad.write_text("- chapter: ch9\n  pr: 12345\n  bench: {timing: x}\n")
    with pytest.raises(ValueError, match="names PR #12345 but no numbers"):
        reference.pr_reports(bad)


def test_load_sweeps_returns_gpu_sweeps_only(tmp_path):
    from synclab.reference import load_sweeps
    from synclab.timing import Sweep

    sweep = Sweep("batch size", [1, 2])
    for slug, is_gpu in (("nvidia-h100", True), ("cpu", False)):
        prov = {**sweep.provenance.to_dict(), "is_gpu": is_gpu, "device": slug}
        (tmp_path / slug).mkdir()
        (tmp_path / slug / "ch9.json").write_text(
            json.dumps({"provenance": prov, "results": {"timing": {**sweep.to_dict(), "provenance": prov}}}))
    found = load_sweeps("ch9", "timing", root=tmp_path)
    assert list(found) == ["nvidia-h100"]
    assert found["nvidia-h100"].values == [1, 2]
    assert load_sweeps("ch9", "other", root=tmp_path) == {}


# ----------------------------------------------------------------------------- the book's GPU headline


def _gpu_reference(root, medians, prov_device="NVIDIA H100 80GB HBM3"):
    from synclab.claims import validated
    from synclab.timing import Sweep, Timing

    gpu = Provenance(prov_device, True, "2.11.0+cu130", "2026-11-23", "x86_64", 16)
    sweep = validated("ch1.timing", lambda: Sweep("requests in the ALL-pooling sub-group", [1, 32, 48], {
        name: [Timing(name, m, 0.0, [m] * 5, gpu) for m in ms] for name, ms in medians.items()}, gpu))
    path = root / gpu.slug / "ch1.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"provenance": gpu.to_dict(), "results": {"timing": sweep.to_dict()}}))


def test_headline_draws_a_recorded_gpu_sweep_whose_claim_holds(tmp_path):
    from synclab.reference import headline_figures

    assert headline_figures("ch1", "timing", "t", root=tmp_path) == []  # nothing recorded: nothing drawn
    _gpu_reference(tmp_path, {"baseline": [10, 100, 1000], "AllPool": [10, 40, 300], "NoSync": [9, 30, 200]})
    (figure,) = headline_figures("ch1", "timing", "AllPool.forward on a GPU", root=tmp_path)
    assert "NVIDIA H100 80GB HBM3" in figure["layout"]["title"]["text"]
    assert [t["y"] for t in figure["data"]] == [[10, 100, 1000], [10, 40, 300], [9, 30, 200]]


def test_headline_refuses_a_recorded_gpu_sweep_that_contradicts_its_claim(tmp_path):
    from synclab.reference import headline_figures

    _gpu_reference(tmp_path, {"baseline": [10, 100, 1000], "AllPool": [10, 90, 900], "NoSync": [9, 30, 200]})
    with pytest.raises(ValueError, match="'AllPool' is 1.11x as fast as"):
        headline_figures("ch1", "timing", "t", root=tmp_path)


def test_headline_draws_a_recorded_trace_timeline(tmp_path):
    """Chapter 6's trace: each configuration's kernels and sync calls become two lanes of bars."""
    from synclab.reference import headline_figures

    gpu = Provenance("NVIDIA H100 80GB HBM3", True, "2.13.0+cu130", "2026-11-23", "x86_64", 16)
    lanes = {"baseline": {"kernels": [[0.0, 5.0], [9.0, 12.0]], "syncs": [[5.0, 9.0]]},
             "all fixes": {"kernels": [[0.0, 5.0], [5.5, 8.0]], "syncs": []}}
    _write(tmp_path, gpu.slug, "ch6", {"provenance": gpu.to_dict(), "results": {"timeline": lanes}})
    (figure,) = headline_figures("ch6", "timeline", "The first steps", root=tmp_path)
    assert "NVIDIA H100 80GB HBM3" in figure["layout"]["title"]["text"]
    bars = {(t["name"], t["y"][0] if t["y"] else None): (list(t["base"]), list(t["x"])) for t in figure["data"]}
    assert bars[("device: kernel", "baseline · kernels")] == ([0.0, 9.0], [5.0, 3.0])
    assert bars[("host: waiting (sync call)", "baseline · syncs")] == ([5.0], [4.0])
    assert bars[("device: kernel", "all fixes · kernels")] == ([0.0, 5.5], [5.0, 2.5])


def test_headline_draws_the_measured_ablation(tmp_path):
    from synclab.reference import headline_figures

    gpu = Provenance("NVIDIA H100 80GB HBM3", True, "2.13.0+cu130", "2026-11-23", "x86_64", 16)
    configs = {label: {"busy_share": share, "tokens_per_s": 1000.0 * share, "wall_s": 1.0, "steps": 8, "tokens": 40,
                       "device_busy_us": 1.0}
               for label, share in (("baseline", 0.4), ("pinned_uploads", 0.6), ("all fixes", 0.95))}
    _write(tmp_path, gpu.slug, "ch6", {"provenance": gpu.to_dict(), "results": {"ablation": {"configs": configs}}})
    (figure,) = headline_figures("ch6", "ablation", "The ablation", root=tmp_path)
    bars = figure["data"]  # per configuration: tokens/s, then the idle share (1 - busy share of a record without it)
    assert [b["x"][0] for b in bars[::2]] == ["baseline", "pinned_uploads", "all fixes"]
    assert [b["y"][0] for b in bars[::2]] == [400.0, 600.0, 950.0]
    assert [round(b["y"][0], 2) for b in bars[1::2]] == [0.6, 0.4, 0.05] and bars[5]["text"][0] == "5%"
    assert "NVIDIA H100 80GB HBM3" in figure["layout"]["title"]["text"]


def test_no_stored_solution_says_no_gpu_run_is_recorded_where_one_is():
    """A chapter with a recorded GPU run shows it in its solution's stored outputs (make solutions re-stores them)."""
    from synclab.reference import REFERENCE_DIR

    root = REFERENCE_DIR.parent.parent
    for notebook in sorted((root / "solutions").glob("0*.ipynb")):
        chapter = f"ch{int(notebook.name[:2])}"
        if any(REFERENCE_DIR.glob(f"*/{chapter}.json")):
            assert "No GPU run of this lab is recorded yet" not in notebook.read_text(), notebook.name


def test_every_gpu_reference_sweep_shows_every_point_inside_its_labelled_axis():
    """A learner found the H200's stretch at one request (about 4 us) below the first label of chapter 1's GPU figure,
    and drawn off the axis: a log axis with labelled ends now adds a label below the lowest point (and above the
    highest) where its ticks had none, for every stored GPU sweep."""
    import math

    from synclab import figures
    from synclab.reference import REFERENCE_DIR, load
    from synclab.timing import Sweep

    drawn = 0
    from synclab.lab.chapters import CHAPTERS

    for chapter in CHAPTERS:
        for slug, data in load(chapter, REFERENCE_DIR).items():
            for name, result in data["results"].items():
                if not (isinstance(result, dict) and "timings" in result and "values" in result):
                    continue
                sweep = Sweep.from_dict(result)
                yaxis = figures.sweep_figure(sweep, name, log_y=True, labelled_ends=True).to_dict()["layout"]["yaxis"]
                low, high = yaxis["range"]
                medians = [t.median_us for timings in sweep.timings.values() for t in timings]
                assert low <= math.log10(min(medians)) and math.log10(max(medians)) <= high, (chapter, slug, name)
                assert min(yaxis["tickvals"]) <= min(medians) and max(yaxis["tickvals"]) >= max(medians)
                drawn += 1
    assert drawn >= 10


def test_a_device_s_run_notes_name_the_commit_in_every_figure_s_subtitle(tmp_path: Path) -> None:
    """A run whose files predate the provenance's commit field: its run.yaml names the commit, and every figure drawn
    from it says so, as a newer run's figures do (``lab 46d6785`` in the subtitle)."""
    from synclab.reference import load_sweeps

    device = tmp_path / "nvidia-h200"
    device.mkdir()
    provenance = {"device": "NVIDIA H200", "is_gpu": True, "torch_version": "2.11.0", "date": "2026-11-27",
                  "host": "x86_64"}
    sweep = {"parameter": "n", "values": [1], "timings": {"a": [{"label": "a n=1", "median_us": 1.0, "iqr_us": 0.0,
                                                             "times_us": [1.0]}]},
             "provenance": provenance}
    (device / "ch9.json").write_text(json.dumps({"provenance": provenance, "results": {"timing": sweep}}))
    assert "lab " not in load_sweeps("ch9", "timing", tmp_path)["nvidia-h200"].provenance.label
    (device / "run.yaml").write_text("commit: 46d6785  # the run's commit\n")
    assert load_sweeps("ch9", "timing", tmp_path)["nvidia-h200"].provenance.label.endswith("· lab 46d6785")
