"""Every stored timing figure says what its page says: the claims, re-checked from stored numbers only.

No timing here: the tests read what `make solutions` (CPU) and `python -m synclab bench` (GPU)
stored, and check each claim's rules on it (synclab.claims). Each rule is also shown to fail
on a contradicting measurement, and a planted contradiction in a stored notebook is caught.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from synclab import claims
from synclab.claims import (Claim, ClaimContradicted, Faster, Flat, Grows, Within, all_claims, check_stored,
                            stored_figures, stored_problems, validated)
from synclab.provenance import Provenance
from synclab.reference import REFERENCE_DIR
from synclab.lab.chapters import import_all

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

import_all()  # the chapters declare their claims when imported
from synclab.timing import Sweep, Timing
from synclab.run_modes import DELIBERATE_ENV

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
CPU = Provenance("cpu", False, "2.13.0+cpu", "2026-11-23", "x86_64", 1)


def made_up(medians: dict[str, list[float]], values: list = [1, 16, 256], prov: Provenance = CPU) -> Sweep:
    return Sweep("n", list(values), {name: [Timing(name, m, 0.0, [m] * 5, prov) for m in ms]
                                     for name, ms in medians.items()}, prov)


# ----------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("rule, holds, contradicts", [
    (Faster(fast=1, slow=0, by=2.0, from_value=16), {"a": [10, 40, 400], "b": [10, 20, 100]},
     {"a": [10, 40, 400], "b": [10, 30, 100]}),
    (Faster(fast="b", slow="a", by=2.0), {"a": [20, 40, 400], "b": [10, 20, 100]}, {"a": [10, 40, 400], "b": [10, 20, 100]}),
    (Within(a=0, b=1, factor=1.1), {"a": [10, 20, 30], "b": [10.5, 19, 30]}, {"a": [10, 20, 30], "b": [10, 20, 40]}),
    (Grows(variant=0, by=10.0), {"a": [1, 5, 10]}, {"a": [1, 5, 9]}),
    (Grows(variant=0, by=4.0, to_value=16), {"a": [1, 5, 2]}, {"a": [1, 3, 100]}),
    (Flat(variant=-1, within=1.5), {"a": [1, 1, 1], "b": [10, 14, 12]}, {"a": [1, 1, 1], "b": [10, 16, 12]}),
])
def test_each_rule_holds_and_fails(rule, holds, contradicts):
    assert rule.problems(made_up(holds)) == []
    found = rule.problems(made_up(contradicts))
    assert found and all(isinstance(p, str) and "n=" in p or "varies" in p or "grows" in p for p in found)


def test_an_unknown_from_value_is_an_error():
    with pytest.raises(ValueError, match="not one of the swept values"):
        Faster(fast=1, slow=0, by=2.0, from_value=99).problems(made_up({"a": [1, 2, 3], "b": [1, 2, 3]}))


# ----------------------------------------------------------------------------- the storing run refuses


@pytest.fixture
def toy_claim():
    claims.declare("toy.sweep", cpu=("b is at least 2x faster than a.", [Faster(fast=1, slow=0, by=2.0)]))
    yield
    claims.REGISTRY.pop(("toy.sweep", "cpu"))


def test_a_storing_run_measures_again_then_refuses(toy_claim, monkeypatch, capsys):
    monkeypatch.setenv(DELIBERATE_ENV, "1")
    runs = []

    def measure():
        runs.append(1)
        return made_up({"a": [10, 10, 10], "b": [10, 10, 10]})

    with pytest.raises(ClaimContradicted, match=r"toy.sweep contradicts its claim after 3 measurements.*idle machine"):
        validated("toy.sweep", measure)
    assert len(runs) == 3
    assert "measuring again (2/3)" in capsys.readouterr().err


def test_a_storing_run_keeps_a_measurement_once_it_holds(toy_claim, monkeypatch):
    monkeypatch.setenv(DELIBERATE_ENV, "1")
    results = iter([made_up({"a": [10] * 3, "b": [10] * 3}), made_up({"a": [30] * 3, "b": [10] * 3})])
    sweep = validated("toy.sweep", lambda: next(results))
    assert sweep.claim["holds"] is True and sweep.claim["problems"] == []
    assert check_stored(Sweep.from_dict(json.loads(json.dumps(sweep.to_dict())))) == []


def test_elsewhere_a_contradiction_is_a_note_never_a_failure(toy_claim, monkeypatch, capsys):
    monkeypatch.delenv(DELIBERATE_ENV, raising=False)
    runs = []
    sweep = validated("toy.sweep", lambda: runs.append(1) or made_up({"a": [10] * 3, "b": [10] * 3}))
    assert len(runs) == 1  # measured once: a test run stays fast
    assert sweep.claim["holds"] is False
    note = capsys.readouterr().out
    assert "differ from the page's sentence" in note and "measured on an idle machine" in note
    assert "run the cell again when this one is quiet" in note  # says what a learner can do: measure again
    assert check_stored(sweep)  # and such a measurement is never accepted as stored


@pytest.mark.parametrize("claim_id", ["ch2.loop", "ch3.gather_sweep"])
def test_a_cpu_run_that_disagrees_says_what_a_cpu_can_and_cannot_show(claim_id, monkeypatch, capsys):
    """Chapters 2 and 3 time two versions that a CPU cannot tell apart: the note says so, not only "noise"."""
    from synclab.lab.chapters import import_all

    import_all()  # each chapter declares its claims when imported
    monkeypatch.delenv(DELIBERATE_ENV, raising=False)
    claim = claims.claim_for(claim_id, is_gpu=False)
    variants = {name: [10, 10, 10] for name in ("before", "after")}
    variants["after"] = [20, 22, 16]  # 1.6-2.2x apart, as a learner's busy 2-core machine printed
    validated(claim_id, lambda: made_up(variants))
    note = capsys.readouterr().out
    assert f"What a CPU can and cannot show here: {claim.shows}" in note
    assert "cannot show what #" in claim.shows and "noise" in claim.shows


def test_a_claim_changed_since_the_measurement_needs_a_new_one(toy_claim):
    sweep = validated("toy.sweep", lambda: made_up({"a": [30] * 3, "b": [10] * 3}))
    claims.declare("toy.sweep", cpu=("b is at least 3x faster than a.", [Faster(fast=1, slow=0, by=3.0)]))
    assert check_stored(sweep) == ["toy.sweep: stored against another claim than the one declared now; re-measure"]


# ----------------------------------------------------------------------------- what is stored


def test_every_solution_stores_its_timing_figures_with_claims_that_hold():
    checked = []
    for notebook in SOLUTIONS:
        assert stored_problems(notebook) == {}, notebook.name
        checked += [name for name, (_, measured) in stored_figures(notebook).items() if measured is not None]
    assert len(checked) >= 10, checked


def test_every_cpu_claim_has_a_stored_figure():
    stored = {measured.claim["id"] for notebook in SOLUTIONS
              for _, measured in stored_figures(notebook).values() if measured is not None}
    declared = {c.id for c in all_claims() if c.device == "cpu"}
    assert declared == stored


def test_stored_figures_draw_the_stored_measurement():
    """A sweep's line or bar for a variant is the variant's medians: the figure and its evidence are one."""
    compared = 0
    for notebook in SOLUTIONS:
        for name, (figure, measured) in stored_figures(notebook).items():
            if measured is None or "time" not in str(figure["layout"].get("yaxis", {}).get("title", "")):
                continue  # derived figures (speed-ups, models) draw something computed from the medians
            for trace in figure["data"]:
                if trace.get("name") in measured.timings and len(trace.get("y", [])) == len(measured.values):
                    assert trace["y"] == pytest.approx(measured.medians_us(trace["name"])), (notebook.name, name)
                    compared += 1
    assert compared >= 8


def _plant(notebook: Path, tmp_path: Path) -> Path:
    """A copy of ``notebook`` whose first stored measurement has its fastest variant made as slow as its baseline."""
    nb = json.loads(notebook.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            evidence = out.get("metadata", {}).get("synclab_measured")
            if evidence:
                timings = evidence["timings"]
                baseline, *others = evidence["variants"]  # stored notebooks sort their keys: the order is kept here
                for other in others:
                    timings[other] = copy.deepcopy(timings[baseline])
                path = tmp_path / notebook.name
                path.write_text(json.dumps(nb))
                return path
    raise AssertionError(f"{notebook.name} stores no measurement")


WITHIN_CLAIMS = ("02_", "03_")  # chapters whose CPU claim is that the lines agree


def _measures(notebook: Path) -> bool:
    """Whether ``notebook`` stores a timed measurement (a new chapter's skeleton counts, and times nothing)."""
    return any(measured is not None for _, measured in stored_figures(notebook).values())


def test_every_chapter_of_the_book_stores_a_timed_measurement():
    assert [n.name[:2] for n in SOLUTIONS if _measures(n)] == [f"{i:02d}" for i in range(7)]


@pytest.mark.parametrize("notebook", [n for n in SOLUTIONS if not n.name.startswith(WITHIN_CLAIMS) and _measures(n)],
                         ids=lambda p: p.stem)
def test_a_planted_contradiction_is_caught(notebook, tmp_path):
    """Making every version as slow as the baseline contradicts every 'faster' claim."""
    assert stored_problems(_plant(notebook, tmp_path))


@pytest.mark.parametrize("notebook", [n for n in SOLUTIONS if n.name.startswith(WITHIN_CLAIMS)],
                         ids=lambda p: p.stem)
def test_a_planted_gap_between_matching_lines_is_caught(notebook, tmp_path):
    """Chapters 2 and 3 claim that the lines agree on a CPU: a 2x gap contradicts them."""
    nb = json.loads(notebook.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            evidence = out.get("metadata", {}).get("synclab_measured")
            if evidence:
                for t in evidence["timings"][evidence["variants"][0]]:
                    t["median_us"] *= 2
    assert stored_problems(nb)


def test_a_measured_figure_without_its_evidence_is_caught():
    nb = json.loads(SOLUTIONS[0].read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            out.get("metadata", {}).pop("synclab_measured", None)
    assert "a measured figure stored without its measurement and claim" in str(stored_problems(nb))


def test_gpu_references_satisfy_their_claims():
    """data/reference/<device>/chN.json, as written by `python -m synclab bench` on a GPU."""
    # every bench file (chN.json); the suite's record beside them, gpu-check.json, is no measurement
    for path in sorted(REFERENCE_DIR.glob("*/ch*.json")) + sorted(REFERENCE_DIR.glob("*/repeat/ch*.json")):
        for name, result in json.loads(path.read_text())["results"].items():
            if isinstance(result, dict) and "claim" in result:
                assert check_stored(Sweep.from_dict(result)) == [], f"{path}: {name}"


def test_a_contradicting_gpu_reference_is_caught():
    gpu = Provenance("NVIDIA H100 80GB HBM3", True, "2.11.0+cu130", "2026-11-23", "x86_64", 16)
    sweep = validated("ch1.timing", lambda: made_up({"baseline": [10, 100, 1000], "AllPool": [10, 90, 900],
                                                      "NoSync": [10, 20, 100]}, values=[1, 32, 48], prov=gpu))
    assert sweep.claim["holds"] is False
    assert any("'AllPool' is 1.11x as fast as" in p for p in check_stored(sweep))


# ----------------------------------------------------------------------------- the pages say the claims


def _page(claim_id: str) -> str:
    chapter = int(claim_id.split(".")[0][2:])
    (page,) = (ROOT / "book").glob(f"{chapter:02d}_*.md")
    return " ".join(page.read_text().split())


@pytest.mark.parametrize("claim", all_claims(), ids=lambda c: f"{c.id}-{c.device}")
def test_every_claim_is_said_on_its_page(claim):
    assert claim.text in _page(claim.id), f"book page of {claim.id} does not say: {claim.text}"


def test_a_sweep_missing_a_variant_its_claim_names_claims_nothing_in_a_lab(toy_claim, monkeypatch, capsys):
    """A lab whose exercise is unfinished profiles the baseline alone: no note, no verdict; a storing run refuses."""
    monkeypatch.delenv(DELIBERATE_ENV, raising=False)
    sweep = validated("toy.sweep", lambda: made_up({"a": [10] * 3}))
    assert sweep.claim["holds"] is None and sweep.claim["partial"] is True
    assert capsys.readouterr().out == ""
    assert check_stored(sweep)  # never accepted as a stored figure
    monkeypatch.setenv(DELIBERATE_ENV, "1")
    with pytest.raises(ClaimContradicted, match="lacks variant"):
        validated("toy.sweep", lambda: made_up({"a": [10] * 3}))


def test_a_lab_with_only_the_baseline_measured_compares_nothing(toy_claim, monkeypatch, capsys):
    """An unfinished exercise: "the last version" is the baseline itself; no "'a' is 1.00x faster than 'a'" note."""
    monkeypatch.delenv(DELIBERATE_ENV, raising=False)
    claims.declare("toy.last", cpu=("the last is 2x faster.", [Faster(fast=-1, slow=0, by=2.0)]))
    try:
        sweep = validated("toy.last", lambda: made_up({"baseline": [10, 10, 10]}))
        assert sweep.claim["partial"] is True and sweep.claim["holds"] is None
        assert capsys.readouterr().out == ""  # nothing compared, nothing printed as a contradiction
        assert claims.claim_for("toy.last", False).missing(made_up({"a": [1] * 3, "b": [1] * 3})) == []
    finally:
        claims.REGISTRY.pop(("toy.last", "cpu"))


def test_a_contradiction_note_never_tells_a_learner_their_code_is_fine(toy_claim, monkeypatch, capsys):
    monkeypatch.delenv(DELIBERATE_ENV, raising=False)
    validated("toy.sweep", lambda: made_up({"a": [10] * 3, "b": [10] * 3}))
    note = capsys.readouterr().out
    assert "Nothing is wrong with your code" not in note and "only a difference that stays then says something about your version" in note



def test_every_stored_cpu_figure_holds_its_sentence_with_headroom():
    """A sentence a loaded 2-core machine breaks is no sentence: stored CPU figures clear their claims with room."""
    checked = 0
    for notebook in SOLUTIONS:
        for name, (_, sweep) in stored_figures(notebook).items():
            if sweep is None or not sweep.claim or sweep.provenance.is_gpu:
                continue
            claim = claims.claim_for(sweep.claim["id"], is_gpu=False)
            assert claim.problems_with_headroom(sweep) == [], f"{notebook.name} {name}"
            checked += 1
    assert checked >= 8


def test_headroom_refuses_a_figure_that_only_just_holds(toy_claim, monkeypatch):
    monkeypatch.setenv(DELIBERATE_ENV, "1")
    just = made_up({"a": [21] * 3, "b": [10] * 3})  # 2.1x against a 2x claim: holds, without room
    claim = claims.claim_for("toy.sweep", is_gpu=False)
    assert claim.problems(just) == [] and claim.problems_with_headroom(just)
    assert Within(0, 1, 1.25).strict().problems(made_up({"a": [10] * 3, "b": [11.3] * 3}))  # half the allowance
    results = iter([just, made_up({"a": [30] * 3, "b": [10] * 3})])
    assert validated("toy.sweep", lambda: next(results)).claim["holds"] is True  # measured again, stored the second


def test_a_point_that_misses_two_thresholds_is_said_once():
    """A learner's note listed the same 64-request point twice, once against 1.5x and once against 2x."""
    thresholds = (Faster(fast="b", slow="a", by=1.5, from_value=16), Faster(fast="b", slow="a", by=2.0, from_value=256))
    claim = Claim("ch0.x", "cpu", "b is at least 1.5x faster than a from 16 up, and at least 2x from 256 up", thresholds)
    sweep = made_up({"a": [10, 14, 120], "b": [10, 10, 100]})
    said = claim.problems(sweep)
    assert said == ["at n=16, 'b' is 1.40x as fast as 'a', not at least 1.5x faster",
                    "at n=256, 'b' is 1.20x as fast as 'a', not at least 1.5x faster (nor 2x)"], said
    assert thresholds[1].problems(sweep) == ["at n=256, 'b' is 1.20x as fast as 'a', not at least 2x faster"]


def test_a_busy_run_whose_claim_holds_is_noted_and_a_quiet_one_is_said_to_agree(toy_claim, capsys):
    """A claim can hold by chance on a busy machine (a learner's run printed 6.6x where the page says 1.5x): rounds
    twice apart or more are noted, as a contradiction is; rounds close together say that the run agrees with the
    page's sentence (a learner read silence as nothing to compare)."""
    def swept(rounds_b: list[float]) -> Sweep:
        sweep = made_up({"a": [40, 40, 40], "b": [10, 10, 10]})
        sweep.timings["b"][1] = Timing("b", 10.0, 0.0, rounds_b, CPU)
        return sweep

    validated("toy.sweep", lambda: swept([9.0, 10.0, 11.0]))
    assert capsys.readouterr().out.startswith("This run agrees with the page's sentence: ")
    validated("toy.sweep", lambda: swept([6.0, 10.0, 30.0]))
    said = capsys.readouterr().out
    assert "rounds spread 5.0x apart (b at n=16)" in said and "too high as well as too low" in said
    assert "agrees" not in said  # a busy run's agreement is noted as chance, not said to agree
