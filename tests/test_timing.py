"""Tests for synclab.timing: structure, provenance and the refusal to time a wrong answer.

Times themselves are never asserted: the machine is noisy. Only what benchmark() and
sweep() promise structurally is (which calls happen, in which order, what is returned).
"""

from __future__ import annotations

import json

import pytest
import torch

from synclab.provenance import Provenance
from synclab import timing
from synclab.timing import ROUNDS, Sweep, Timing, benchmark, compare, measurement_threads, median, sweep
from synclab.run_modes import BOOK_BUILD_ENV, DELIBERATE_ENV, SMOKE_ENV

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

FAST = 0.01  # min_run_time: keeps every benchmark here around 10-20 ms


@pytest.fixture(autouse=True)
def full_protocol(monkeypatch):
    """These tests check the protocol a reader's run follows, not the test suite's smoke run."""
    monkeypatch.delenv(SMOKE_ENV, raising=False)


def assert_cpu_provenance(prov: Provenance) -> None:
    assert isinstance(prov, Provenance)
    assert prov.device == "cpu"
    assert prov.is_gpu is False
    assert prov.torch_version == torch.__version__


# ----------------------------------------------------------------------------- benchmark


def test_benchmark_returns_a_timing_with_provenance():
    x = torch.arange(10.0)

    def total():
        return x.sum()

    t = benchmark(total, min_run_time=FAST)
    assert isinstance(t, Timing)
    assert t.label == "total"  # the function's name by default
    assert t.times_us and all(isinstance(v, float) and v > 0 for v in t.times_us)
    assert t.median_us > 0 and t.iqr_us >= 0
    assert_cpu_provenance(t.provenance)
    assert str(t).startswith("total: median ")
    assert len(t.times_us) == ROUNDS and f"{ROUNDS} rounds" in str(t)  # one median per round
    assert t.to_dict() == {"label": "total", "median_us": t.median_us, "iqr_us": t.iqr_us, "times_us": t.times_us}


def test_benchmark_passes_args_and_kwargs_and_label():
    seen = []

    def fn(a, b, *, c):
        seen.append((a, b, c))
        return a + b + c

    t = benchmark(fn, 1, 2, c=3, label="my label", expected=6, min_run_time=FAST)
    assert t.label == "my label"
    assert seen and set(seen) == {(1, 2, 3)}


@pytest.mark.parametrize("warmup", [0, 3])
def test_warmup_and_setup_are_honoured(warmup):
    calls = []

    def fn():
        calls.append("fn")

    def setup():
        calls.append("setup")

    benchmark(fn, warmup=warmup, setup=setup, min_run_time=FAST)
    untimed = 1 + warmup  # the checked first call, then the warm-up calls
    assert calls[:untimed] == ["fn"] * untimed  # no setup before the checked call or the warm-up
    assert calls[untimed] == "setup"  # timing starts with a setup
    n_setup, n_fn = calls.count("setup"), calls.count("fn")
    assert n_setup >= 1
    assert n_fn - untimed >= n_setup  # at least one timed call per setup
    assert calls[-1] == "fn"  # a setup is always followed by a timed call


def test_without_setup_fn_runs_first_call_warmup_then_timed_calls():
    calls = []
    benchmark(lambda: calls.append(1), warmup=5, min_run_time=FAST)
    assert len(calls) > 1 + 5


def test_check_sees_the_first_result_once():
    results = iter(range(10**9))
    checked = []
    benchmark(lambda: next(results), check=checked.append, warmup=2, min_run_time=FAST)
    assert checked == [0]


def test_wrong_tensor_is_refused_before_timing():
    calls = []

    def wrong():
        calls.append(1)
        return torch.tensor([1.0, 2.0])

    with pytest.raises(AssertionError, match="refusing to time it"):
        benchmark(wrong, label="wrong", expected=torch.tensor([1.0, 3.0]), min_run_time=FAST)
    assert len(calls) == 1  # no warm-up, no timing


def test_wrong_plain_value_is_refused_before_timing():
    calls = []

    def wrong():
        calls.append(1)
        return "abc"

    with pytest.raises(AssertionError, match=r"got 'abc', expected 'abd'; refusing to time it"):
        benchmark(wrong, expected="abd", min_run_time=FAST)
    assert len(calls) == 1


def test_failing_check_stops_before_timing():
    calls = []

    def fn():
        calls.append(1)
        return 41

    def check(result):
        assert result == 42, "not the answer"

    with pytest.raises(AssertionError, match="not the answer"):
        benchmark(fn, check=check, min_run_time=FAST)
    assert len(calls) == 1


def test_right_answers_are_accepted():
    benchmark(lambda: torch.tensor([1.0, 2.0]), expected=torch.tensor([1.0, 2.0]), min_run_time=FAST)
    benchmark(lambda: [1, 2, 3], expected=[1, 2, 3], min_run_time=FAST)
    benchmark(lambda: {"a": "x"}, expected={"a": "x"}, min_run_time=FAST)
    benchmark(lambda: (torch.ones(2), 3), expected=(torch.ones(2), 3), min_run_time=FAST)


# ----------------------------------------------------------------------------- sweep


def test_sweep_structure_and_factory_calls(capsys):
    built = []

    def factory(name):
        def build(n):
            built.append((name, n))
            x = torch.ones(n)
            return lambda: x.sum()

        return build

    result = sweep({"slow": factory("slow"), "fast": factory("fast")}, "n", (v for v in (1, 8, 64)),
                   min_run_time=FAST, progress=False)
    assert isinstance(result, Sweep)
    assert result.parameter == "n"
    assert result.values == [1, 8, 64]  # a generator is accepted and kept as a list
    assert built == [("slow", 1), ("fast", 1), ("slow", 8), ("fast", 8), ("slow", 64), ("fast", 64)]  # value by value
    assert list(result.timings) == ["slow", "fast"]
    for name in ("slow", "fast"):
        assert [t.label for t in result.timings[name]] == [f"{name} n=1", f"{name} n=8", f"{name} n=64"]
        assert all(isinstance(t, Timing) for t in result.timings[name])
        assert len(result.medians_us(name)) == 3
    assert_cpu_provenance(result.provenance)
    assert len(result.ratio("slow", "fast")) == 3
    table = result.table().splitlines()
    assert len(table) == 4 and "slow" in table[0] and "fast" in table[0]
    assert capsys.readouterr().err == ""  # progress=False: silent


def test_sweep_checks_every_variant_against_the_reference_before_timing():
    def right(n):
        x = torch.arange(n)
        return lambda: x * 2

    def wrong(n):
        x = torch.arange(n)
        return lambda: x * 2 + (n > 4)  # right for small n only

    ok = sweep({"ref": right, "same": right}, "n", [1, 8], min_run_time=FAST, progress=False, reference="ref")
    assert list(ok.timings) == ["ref", "same"]
    with pytest.raises(AssertionError, match="wrong n=8: wrong result, refusing to time it"):
        sweep({"ref": right, "wrong": wrong}, "n", [1, 8], min_run_time=FAST, progress=False, reference="ref")
    with pytest.raises(ValueError, match="not one of the variants"):
        sweep({"ref": right}, "n", [1], min_run_time=FAST, progress=False, reference="nope")


def test_sweep_progress_bar_in_a_terminal(capsys):
    sweep({"a": lambda n: (lambda: n), "b": lambda n: (lambda: n)}, "size", [1, 2], min_run_time=FAST)
    captured = capsys.readouterr()
    assert captured.out == ""  # the bar goes to stderr, not into stdout
    err = captured.err
    for done in range(1, 3):
        assert f"\rsweeping size: {done}/2 (" in err
    assert "(size=1)" in err and "(size=2)" in err
    assert err.endswith("\n")  # closed: the next output starts on a fresh line


def _prov(device="NVIDIA H100 80GB HBM3", is_gpu=True) -> Provenance:
    return Provenance(device=device, is_gpu=is_gpu, torch_version="2.9.0", date="2026-01-02", host="x86_64")


def _timing(label: str, median_us: float, prov: Provenance) -> Timing:
    return Timing(label, median_us, 1.5, [median_us - 1, median_us, median_us + 1], prov)


def _made_up_sweep() -> Sweep:
    prov = _prov()
    return Sweep("batch size", [1, 4],
                 {"slow": [_timing("slow 1", 10.0, prov), _timing("slow 4", 40.0, prov)],
                  "fast": [_timing("fast 1", 5.0, prov), _timing("fast 4", 4.0, prov)]},
                 prov)


def test_ratio_and_medians():
    s = _made_up_sweep()
    assert s.medians_us("slow") == [10.0, 40.0]
    assert s.ratio("slow", "fast") == [2.0, 10.0]
    assert s.ratio("fast", "slow") == [0.5, 0.1]


def test_sweep_dict_round_trip_through_json():
    s = _made_up_sweep()
    data = json.loads(json.dumps(s.to_dict()))
    assert data["provenance"]["device"] == "NVIDIA H100 80GB HBM3"
    back = Sweep.from_dict(data)
    assert back == s
    assert back.provenance == s.provenance
    assert all(t.provenance == s.provenance for ts in back.timings.values() for t in ts)
    assert back.to_dict() == s.to_dict()


def test_real_sweep_round_trip():
    s = sweep({"v": lambda n: (lambda: n * 2)}, "n", [3], min_run_time=FAST, progress=False)
    back = Sweep.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
    assert_cpu_provenance(back.provenance)


def test_median():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0, 3.0, 10.0]) == 2.5


# ----------------------------------------------------------------------------- the protocol


def test_one_thread_while_measuring_and_restored_after():
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []
        t = benchmark(lambda: seen.append(torch.get_num_threads()), min_run_time=FAST)
        assert set(seen) == {1}  # the checked call, the warm-up and every timed call
        assert torch.get_num_threads() == 2  # restored
        assert t.provenance.threads == 1 and "1 torch thread" in t.provenance.label
        with pytest.raises(ZeroDivisionError), measurement_threads():
            1 / 0
        assert torch.get_num_threads() == 2  # restored after an exception too
    finally:
        torch.set_num_threads(saved)


def test_variants_are_interleaved_round_robin(monkeypatch):
    """Every round times every variant, in an order that rotates; no variant is timed all at once."""
    order = []
    real = timing._time_block

    def spy(call, number, setup):
        order.append(call.__name__)
        return real(call, number, setup)

    def a(): return 1
    def b(): return 2
    def c(): return 3

    monkeypatch.setattr(timing, "_calibrate", lambda call, block_s, setup: 1)
    monkeypatch.setattr(timing, "_time_block", spy)
    compare({"a": a, "b": b, "c": c}, rounds=3, min_run_time=FAST)
    per_round = timing.BLOCKS_PER_ROUND * 3
    rounds = [order[i:i + per_round] for i in range(0, len(order), per_round)]
    assert len(rounds) == 3
    assert rounds[0][:3] == ["a", "b", "c"] and rounds[1][:3] == ["b", "c", "a"] and rounds[2][:3] == ["c", "a", "b"]
    for r in rounds:
        assert sorted(r) == sorted(["a", "b", "c"] * timing.BLOCKS_PER_ROUND)


def test_the_statistic_is_the_median_of_per_round_medians(monkeypatch):
    blocks = iter([1.0, 9.0, 2.0,  # round 1: median 2
                   5.0, 4.0, 3.0,  # round 2: median 4
                   7.0, 100.0, 6.0])  # round 3: median 7 (the 100 is a hiccup)
    monkeypatch.setattr(timing, "_calibrate", lambda call, block_s, setup: 1)
    monkeypatch.setattr(timing, "_time_block", lambda call, number, setup: next(blocks) * 1e-6)
    t = compare({"x": lambda: None}, rounds=3, warmup=0)["x"]
    assert t.times_us == pytest.approx([2.0, 4.0, 7.0])
    assert t.median_us == pytest.approx(4.0)
    assert (t.low_us, t.high_us) == pytest.approx((2.0, 7.0))


def test_calibration_makes_blocks_long_enough():
    calls = []
    number = timing._calibrate(lambda: calls.append(1), 0.002, None)
    assert number >= 2 and (number & (number - 1)) == 0  # a power of two
    assert len(calls) == 2 * number - 1  # 1 + 2 + ... + number


def test_nothing_is_measured_while_the_book_builds(monkeypatch):
    from synclab.profiling import profile

    monkeypatch.setenv(BOOK_BUILD_ENV, "1")
    with pytest.raises(RuntimeError, match="the book build measures nothing"):
        benchmark(lambda: 1, min_run_time=FAST)
    with pytest.raises(RuntimeError, match="the book build measures nothing"):
        profile(lambda: torch.ones(2).sum())


def test_a_smoke_run_times_one_call_per_block_over_two_rounds_and_still_checks(monkeypatch):
    """The test suite's timings (conftest.py) keep the whole path: the check, warm-up, interleaving."""
    calls = {"a": 0, "b": 0}

    def counted(name):
        def call():
            calls[name] += 1
            return 1
        return call

    monkeypatch.setenv(SMOKE_ENV, "1")
    got = compare({"a": counted("a"), "b": counted("b")}, rounds=5, min_run_time=10.0)
    # the checked call, one warm-up, one calibration call, then one block of one call in each of 2 rounds
    assert calls == {"a": 5, "b": 5}
    assert [len(t.times_us) for t in got.values()] == [2, 2]
    with pytest.raises(AssertionError, match="refusing to time it"):
        compare({"a": lambda: 1, "b": lambda: 2}, expected={"b": 1})
    calls.update(a=0, b=0)
    compare({"a": counted("a"), "b": counted("b")}, rounds=2, min_run_time=FAST, decides_a_check=True)
    assert calls["a"] > 5  # a check's verdict rests on its times: never the short path
    monkeypatch.setenv(DELIBERATE_ENV, "1")  # nor a storing run
    calls.update(a=0, b=0)
    compare({"a": counted("a"), "b": counted("b")}, rounds=2, min_run_time=FAST)
    assert calls["a"] > 5
