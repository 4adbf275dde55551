"""Chapter 6's deep workload and its host time: the sliding-window model, resumed requests, the clock of the parts."""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

import pytest

from synclab import capstone as ch6
from synclab.capstone.host_time import HOST_PHASES, HostPhases, host_phases, phase_clock
from synclab.capstone.workloads import Workload, book_fixes, decode_workload
from synclab.engine.engine_core import EngineConfig, EngineRunner
from synclab.engine.input_batch_baseline import InputBatchBaseline
from synclab.engine.scheduler import Scheduler
from synclab.engine.tiny_llm import CPU_MODEL, TinyDecoder

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def test_a_sliding_window_changes_nothing_while_positions_fit_it():
    mix = ch6.random_mix(random.Random(3), num_requests=6)
    windowed = replace(mix, model=replace(CPU_MODEL, sliding_window=True))
    want = ch6.comparable(ch6.run_engine(mix, EngineConfig(), book_fixes()))
    assert ch6.first_difference(ch6.comparable(ch6.run_engine(windowed, EngineConfig(), book_fixes())), want) is None


def test_a_deep_workload_computes_the_same_tokens_in_every_configuration_of_the_ablation():
    workload = decode_workload(5_000, 3, embeddings=3, decode_tokens=4, pooled_per_step=1, deep=True)
    want = ch6.comparable(ch6.run_engine(workload, EngineConfig.baseline(), book_fixes()))
    assert all(len(tokens) == 4 for req, (tokens, _, _) in want.items() if req.startswith("gen"))
    for config in ch6.ablation_configs()[1:]:
        got = ch6.comparable(ch6.run_engine(workload, config, book_fixes()))
        assert ch6.first_difference(got, want) is None, config.label


def test_a_slot_taken_again_sees_none_of_its_last_requests_rows():
    """The window holds positions, not owners: a new request in a slot must not read what the last one left."""
    later = decode_workload(3_005, 2, num_requests=2, decode_tokens=8, deep=True)
    alone = ch6.comparable(ch6.run_engine(later, EngineConfig(), book_fixes()))
    earlier = decode_workload(3_000, 2, num_requests=2, decode_tokens=8, deep=True)  # its rows sit in later's window
    ch6.run_engine(earlier, EngineConfig(), book_fixes())
    after = ch6.comparable(ch6.run_engine(later, EngineConfig(), book_fixes()))
    assert ch6.first_difference(after, alone) is None
    # without the reset the second run reads the first's rows: the test can fail
    forget = TinyDecoder.forget_slot
    try:
        TinyDecoder.forget_slot = lambda self, slot: None
        ch6.run_engine(earlier, EngineConfig(), book_fixes())
        assert ch6.first_difference(ch6.comparable(ch6.run_engine(later, EngineConfig(), book_fixes())), alone)
    finally:
        TinyDecoder.forget_slot = forget


def test_resumed_requests_need_a_sliding_window():
    deep = decode_workload(400, 1, decode_tokens=2, deep=True)
    plain = Workload(deep.requests, deep.scheduler, CPU_MODEL)
    with pytest.raises(ValueError, match="sliding-window model"):
        ch6.run_engine(plain, EngineConfig(), book_fixes())


def test_the_phase_clock_charges_every_part_and_puts_the_engine_back():
    originals = {(cls, name): cls.__dict__.get(name) for cls, name in
                 [(EngineRunner, "upload"), (Scheduler, "schedule"), (TinyDecoder, "forward"),
                  (InputBatchBaseline, "update_async_output_token_ids")]}
    workload = decode_workload(2_000, 2, embeddings=4, decode_tokens=4, pooled_per_step=1, deep=True)
    rows = host_phases(workload, [EngineConfig.baseline(), EngineConfig()], rounds=2, components=book_fixes())
    assert list(rows) == ["baseline", "all fixes"]
    for row in rows.values():
        assert list(row.per_phase_us) == list(HOST_PHASES) and len(row.round_totals_us) == 2
        assert all(row.per_phase_us[p] > 0 for p in ("schedule", "uploads", "model", "pool", "scan", "sample"))
        parts = row.parts_of_step_us()  # what the page draws and the table prints: the parts add up to the step
        assert sum(parts.values()) == pytest.approx(statistics.median(row.round_totals_us))
        assert row.own_us == pytest.approx(sum(parts.values()) - parts["model"])
    assert {key: key[0].__dict__.get(key[1]) for key in originals} == originals
    fixes = book_fixes()
    with pytest.raises(RuntimeError), phase_clock(fixes):
        raise RuntimeError("a run that raises")
    assert {key: key[0].__dict__.get(key[1]) for key in originals} == originals
    assert "update_async_output_token_ids" in fixes.input_batch.__dict__  # the fix's own method, restored


@pytest.mark.parametrize("unfinished", [frozenset(), frozenset({"reverse_scan"})])
def test_host_time_holds_the_page_s_sentence_only_to_fixes_that_are_written(monkeypatch, capsys, unfinished):
    """A lab whose chapter 4 is not written yet runs the code before its PR in every row that names it: its times
    are not the page's, and no note says they contradict it. The same rows from written fixes are held to it."""
    from synclab.capstone import profiling

    flat = [1000.0, 1000.0, 1000.0]  # every configuration as slow as the baseline: the sentence does not hold
    monkeypatch.setattr(profiling, "host_phases", lambda workload, configs, rounds, components: {
        components.label_for(c): HostPhases({p: 100.0 for p in HOST_PHASES}, flat)
        for c in ch6.ablation_configs()})
    fixes = replace(book_fixes(), unfinished=unfinished)
    result = profiling.host_time_by_phase(decode_workload(100, 1, num_requests=1, decode_tokens=3), components=fixes)
    said = capsys.readouterr().out
    if unfinished:
        assert result.steps.claim["partial"] and result.steps.claim["holds"] is None and "Note:" not in said
    else:
        assert result.steps.claim["holds"] is False and "differ from the page's sentence" in said


def test_a_model_fed_with_times_taken_on_a_busy_machine_says_so():
    """Chapter 6's MODEL cell prints the host time's busy note: its busy shares are only as good as those times."""
    from synclab.capstone.profiling import HostTime

    def times(step_us: float) -> HostTime:
        return HostTime(None, {"baseline": HostPhases({p: 100.0 for p in HOST_PHASES}, [step_us] * 3)})

    parts = 100.0 * len(HOST_PHASES)
    assert times(parts * 1.02).busy_note() == ""
    assert "busy machine" in times(parts * 1.5).busy_note()
    assert times(parts * 1.5).parts_off() == pytest.approx(0.5)


def test_a_host_time_table_whose_parts_miss_their_step_says_the_machine_was_busy():
    from synclab.capstone.profiling import HostTime

    def table(step_us: float) -> str:
        return HostTime(None, {"baseline": HostPhases({p: 100.0 for p in HOST_PHASES}, [step_us] * 3)}).table()

    parts = 100.0 * len(HOST_PHASES)
    assert "the machine was busy" not in table(parts * 1.02)
    assert "the machine was busy" in table(parts * 1.2) and "the machine was busy" in table(parts * 0.8)
    # past the bound no percentage is printed (a learner read "adjusted by at most ±123.1%" as nonsense)
    assert "adjusted by at most ±2.0%" in table(parts * 1.02) and "adjusted" not in table(parts * 2.2)


def test_the_host_time_table_says_whether_the_pages_claim_held_in_this_run():
    """A learner computed the ratios by hand to see whether the page's claim held: the table says it, with them."""
    from types import SimpleNamespace

    from synclab.capstone.profiling import HostTime, _CH6_PHASES_CPU

    def table(holds: bool, scan_us: float) -> str:
        steps = SimpleNamespace(claim={"claim": {"text": _CH6_PHASES_CPU[0]}, "holds": holds})
        rows = {"baseline": 8000.0, "reverse_scan": scan_us, "all fixes": 3000.0}
        return HostTime(steps, {label: HostPhases({p: us / len(HOST_PHASES) for p in HOST_PHASES}, [us] * 3)
                                for label, us in rows.items()}).table()

    held = table(True, 3600.0)
    assert f"checked by this run: {_CH6_PHASES_CPU[0]} It held: the reverse scan alone 2.22×, all five 2.67×." in held
    assert "did not hold in this run" in table(False, 7000.0) and "alone 1.14×" in table(False, 7000.0)
    assert "claim" not in HostTime(None, {"baseline": HostPhases({p: 1.0 for p in HOST_PHASES}, [9.0])}).table()
