"""Tests for synclab.checks: every way an implementation can go wrong becomes one readable line."""

from __future__ import annotations

import json
import time

import pytest

from synclab.checks import (REPORT_LOG_ENV, Check, CheckFailed, CheckReport, Outcome, expect, expect_equal,
                            run_checks)
from tests.snapshots import matches_report_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


# ----------------------------------------------------------------------------- implementations under test


def good_double(x):
    return 2 * x


def wrong_double(x):
    return 2 * x + 1


def stub_double(x):
    raise NotImplementedError("Exercise 9.9")


STUB_LINE = stub_double.__code__.co_firstlineno + 1  # the line of its raise


def crashing_double(x):
    values = {}
    return values[x]  # CRASH_LINE_MARKER


def check_doubles(impl, rng):
    x = rng.randrange(1, 1000)
    expect_equal(impl(x), 2 * x, what="impl(x)", hint="double it", case=f"x = {x}")


DOUBLE_CHECK = Check("9.9", "doubles its input", check_doubles, hint="generic hint")


def run_one(impl, check=DOUBLE_CHECK, seed=1234) -> CheckReport:
    return run_checks("Exercise 9.9 — double", [check], impl, seed=seed)


@pytest.fixture(autouse=True)
def _no_report_log(monkeypatch):
    """A report log inherited from a `python -m synclab check` run must not collect these reports."""
    monkeypatch.delenv(REPORT_LOG_ENV, raising=False)


# ----------------------------------------------------------------------------- statuses


def test_passed():
    report = run_one(good_double)
    assert [o.status for o in report.outcomes] == ["passed"]
    assert report.passed
    assert report.outcomes[0].ok
    assert report.summary == "Exercise 9.9 — double: 1/1 checks passed"
    text = str(report)
    assert "✓ [9.9] doubles its input" in text
    assert "seed=" not in text  # nothing failed: no seed to replay


def test_failed_reports_expected_got_hint_and_case():
    report = run_one(wrong_double, seed=77)
    (outcome,) = report.outcomes
    assert outcome.status == "failed"
    assert not report.passed
    # The case is drawn from the check's rng: replay it to know what x was.
    x = int(outcome.case.removeprefix("x = "))
    assert outcome.expected == repr(2 * x)
    assert outcome.got == repr(2 * x + 1)
    assert outcome.hint == "double it"  # the specific hint wins over the check's generic one
    assert outcome.message == "impl(x) differs"
    text = str(report)
    assert "✗ [9.9] doubles its input: failed" in text
    assert f"case: x = {x}" in text
    assert f"expected: {2 * x}" in text
    assert f"got: {2 * x + 1}" in text
    assert "hint: double it" in text
    assert "seed=77" in text  # something failed: the seed is printed to replay the case
    assert "0/1 checks passed" in text


def test_failed_without_specific_hint_uses_the_checks_hint():
    def check(impl, rng):
        expect(impl(1) == 2, "impl(1) must be 2", expected=2, got=impl(1))

    report = run_one(wrong_double, Check("9.9", "one", check, hint="generic hint"))
    (outcome,) = report.outcomes
    assert outcome.status == "failed"
    assert outcome.hint == "generic hint"
    assert (outcome.expected, outcome.got, outcome.case) == ("2", "3", "")


def test_long_values_are_shortened():
    def check(impl, rng):
        raise CheckFailed("too long", expected="e" * 1000, got=list(range(1000)))

    (outcome,) = run_one(good_double, Check("9.9", "long", check)).outcomes
    assert len(outcome.expected) == 300 and outcome.expected.endswith("...")
    assert len(outcome.got) == 300 and outcome.got.startswith("[0, 1, 2")


def test_not_implemented_shows_the_exercise():
    report = run_one(stub_double)
    (outcome,) = report.outcomes
    assert outcome.status == "not implemented"
    # where it raised: an answer written in part is told which part is still a stub
    assert outcome.message == f"not implemented yet (Exercise 9.9; raised in stub_double, line {STUB_LINE})"
    text = str(report)
    assert "not implemented yet (Exercise 9.9; raised in stub_double" in text
    assert "seed=" not in text  # a stub has no random case worth replaying
    assert not report.passed


def test_an_exercise_not_started_is_one_line_not_a_line_per_check():
    report = run_checks("Exercise 9.9", [DOUBLE_CHECK, Check("9.9", "again", check_doubles)], stub_double, seed=1)
    assert str(report) == (f"Exercise 9.9: not implemented yet (Exercise 9.9; raised in stub_double, line {STUB_LINE}); "
                           "its 2 checks run once it is written")
    assert "its 2 checks run" in report._repr_html_() and not report.passed
    started = run_checks("Exercise 9.9", [DOUBLE_CHECK], good_double, seed=1)
    assert started.not_started is None and "checks passed" in str(started)


def test_not_implemented_without_message():
    def stub(x):
        raise NotImplementedError

    (outcome,) = run_one(stub).outcomes
    assert (outcome.status, outcome.message) == ("not implemented", f"not implemented yet (raised in stub, line "
                                                                    f"{stub.__code__.co_firstlineno + 1})")


def test_crashed_is_one_line_naming_exception_and_user_line():
    report = run_one(crashing_double, seed=5)
    (outcome,) = report.outcomes
    assert outcome.status == "crashed"
    assert outcome.message.startswith("KeyError: ")
    assert "\n" not in outcome.message
    assert "in crashing_double, line" in outcome.message
    assert "CRASH_LINE_MARKER" in outcome.message  # the source of the user's line is quoted
    assert outcome.hint == "generic hint"
    text = str(report)
    assert "Traceback" not in text and 'File "' not in text
    assert "crashed" in text
    assert "seed=5" in text


def test_an_undefined_name_says_where_the_answer_runs_alone():
    """A name the notebook made in a cell the terminal's check and the grader do not run: the crash says so."""
    def impl(x):
        return x * profile_cell_result  # noqa: F821 (made by a profile cell, in the notebook alone)

    (outcome,) = run_one(impl).outcomes
    assert outcome.status == "crashed" and outcome.message.startswith("NameError:"), outcome
    assert "after the lab's setup cells alone" in outcome.hint, outcome.hint
    (other,) = run_one(crashing_double).outcomes  # another crash keeps its check's own hint
    assert "setup cells alone" not in other.hint


def test_a_plain_assert_in_user_code_is_a_crash_not_a_failed_check():
    def impl(x):
        assert x < 0, "x must be negative"

    (outcome,) = run_one(impl).outcomes
    assert outcome.status == "crashed"
    assert outcome.message.startswith("AssertionError: x must be negative")


def test_endless_loop_times_out():
    def endless(x):
        # "Endless" for a 1 s limit; bounded so a broken time limit fails this test instead of hanging it.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            pass
        return 2 * x

    check = Check("9.9", "terminates", check_doubles, timeout_s=1)
    start = time.monotonic()
    report = run_one(endless, check)
    elapsed = time.monotonic() - start
    (outcome,) = report.outcomes
    assert outcome.status == "timed out"
    assert outcome.message == "no answer within 1 s"
    assert "loop" in outcome.hint
    assert elapsed < 10
    matches_report_snapshot(report)


def _bounded_loop(x):
    deadline = time.monotonic() + 20  # "endless" for a 1 s limit; bounded so a broken limit fails, not hangs
    while time.monotonic() < deadline:
        pass
    return 2 * x


def _bounded_sleep(x):
    time.sleep(20)
    return 2 * x


@pytest.mark.parametrize("impl", [_bounded_loop, _bounded_sleep], ids=["loop", "sleep"])
def test_a_timeout_costs_that_check_alone(impl, monkeypatch):
    """Every check still runs after one times out (briefly): an endless loop scores 0, check by check."""
    monkeypatch.setattr("synclab.checks.AFTER_TIMEOUT_S", 0.5)
    checks = [Check("9.9", f"check {i}", check_doubles, timeout_s=1) for i in range(4)]
    start = time.monotonic()
    report = run_checks("Exercise 9.9", checks, impl, seed=1)
    assert [o.status for o in report.outcomes] == ["timed out"] * 4
    assert time.monotonic() - start < 1 + 3 * 0.5 + 2  # the later checks had the shorter limit
    assert (report.earned, report.points) == (0, 4) and not report.passed


def test_checks_that_cannot_outlive_a_timeout_are_skipped_after_one():
    checks = [Check("9.9", f"check {i}", check_doubles, timeout_s=1) for i in range(4)]
    report = run_checks("Exercise 9.9", checks, _bounded_sleep, seed=1, skip_after_timeout=True)
    assert [o.status for o in report.outcomes] == ["timed out", "skipped", "skipped", "skipped"]
    assert report.outcomes[1].message == "not run: an earlier check of this exercise timed out"


def test_a_loop_on_one_case_does_not_cost_the_other_checks():
    def loops_on_zero(x):
        return _bounded_loop(x) if x == 0 else 2 * x

    def doubles_zero(impl, rng):
        expect(impl(0) == 0, "0 doubled")

    checks = [Check("9.9", "zero", doubles_zero, timeout_s=1, points=2),
              *(Check("9.9", f"check {i}", check_doubles, timeout_s=1) for i in range(3))]
    report = run_checks("Exercise 9.9", checks, loops_on_zero, seed=1)
    assert [o.status for o in report.outcomes] == ["timed out", "passed", "passed", "passed"]
    assert (report.earned, report.points) == (3, 5)
    assert report.summary == "Exercise 9.9: 3/4 checks passed (60% of the exercise's points)"
    assert report.to_dict()["earned"] == 3 and report.to_dict()["outcomes"][0]["points"] == 2


def test_a_check_that_earned_part_of_its_points_says_so_in_the_summary():
    def half(impl, rng):
        raise CheckFailed("half of it held", share=0.5)

    report = run_checks("Exercise 9.9", [Check("9.9", "half", half, points=2)], lambda x: x, seed=1)
    assert report.summary == "Exercise 9.9: 0/1 checks passed in full (50% of the exercise's points)"


def test_the_exercise_has_one_limit_for_all_its_checks():
    def slow_double(x):
        time.sleep(0.4)
        return 2 * x

    checks = [Check("9.9", f"check {i}", check_doubles, timeout_s=5) for i in range(6)]
    report = run_checks("Exercise 9.9", checks, slow_double, seed=1, limit_s=1.0)
    statuses = [o.status for o in report.outcomes]
    assert statuses[0] == "passed" and "timed out" in statuses  # the third check gets what is left: 0.2 s
    assert statuses[-1] == "skipped"


def test_time_limit_is_cleared_after_the_check():
    """The alarm of a passed check must not fire later, in unrelated code."""
    run_one(good_double, Check("9.9", "fast", check_doubles, timeout_s=0.2))
    time.sleep(0.4)  # an alarm still armed would raise CheckTimeout here


def test_outcomes_in_order_and_summary_counts():
    checks_ = [DOUBLE_CHECK, Check("9.9", "second", lambda impl, rng: expect(False, "nope"))]
    report = run_checks("T", checks_, good_double, seed=3)
    assert [(o.name, o.status) for o in report.outcomes] == [("doubles its input", "passed"), ("second", "failed")]
    assert report.summary == "T: 1/2 checks passed"
    assert not report.passed


# ----------------------------------------------------------------------------- seeds


def _recording_check(seen: list):
    def check(impl, rng):
        seen.append([rng.random() for _ in range(5)])

    return Check("9.9", "records its random case", check)


def test_same_seed_same_random_cases():
    seen: list = []
    for seed in (42, 42, 43):
        run_checks("T", [_recording_check(seen)], good_double, seed=seed)
    assert seen[0] == seen[1]
    assert seen[0] != seen[2]


def test_each_check_has_its_own_stream():
    seen_a, seen_b = [], []
    a, b = _recording_check(seen_a), _recording_check(seen_b)
    b = Check("9.9", "another name", b.run)
    run_checks("T", [a, b], good_double, seed=42)
    assert seen_a != seen_b


def test_runs_without_seed_draw_different_seeds():
    seen: list = []
    reports = [run_checks("T", [_recording_check(seen)], good_double) for _ in range(4)]
    assert len({r.seed for r in reports}) > 1
    assert len({tuple(s) for s in seen}) > 1
    # The printed seed replays the run.
    replay: list = []
    run_checks("T", [_recording_check(replay)], good_double, seed=reports[0].seed)
    assert replay[0] == seen[0]


# ----------------------------------------------------------------------------- rendering


def test_repr_is_the_text():
    report = run_one(wrong_double)
    assert repr(report) == str(report)


def test_html_is_a_table():
    html = run_checks("T", [DOUBLE_CHECK, Check("9.9", "broken", lambda i, r: expect(False, "bad"))],
                      good_double, seed=9)._repr_html_()
    assert html.startswith("<div>") and html.endswith("</div>")
    assert "<table>" in html and "</table>" in html
    assert html.count("<tr>") == 3  # header + one row per check
    assert "<th>status</th>" in html
    assert "doubles its input" in html and "broken" in html
    assert "T: 1/2 checks passed" in html
    assert "seed=9" in html
    assert "#c62828" in html  # not passed: red summary


def test_html_passed_is_green_without_seed():
    html = run_one(good_double, seed=9)._repr_html_()
    assert "#2e7d32" in html
    assert "seed" not in html


def test_html_escapes_everything_user_supplied():
    evil = "<script>alert('x')</script>"

    def check(impl, rng):
        raise CheckFailed(f"message {evil}", expected=evil, got="<b>&</b>", hint=evil, case=evil)

    report = run_checks(f"title {evil}", [Check("<9.9>", f"name {evil}", check)], good_double, seed=1)
    html = report._repr_html_()
    assert "<script>" not in html
    assert "<b>&</b>" not in html
    assert "&lt;script&gt;" in html
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in html
    assert "&lt;9.9&gt;" in html


# ----------------------------------------------------------------------------- report log, empty reports


def test_report_log_gets_one_json_line_per_report(tmp_path, monkeypatch):
    log = tmp_path / "checks.jsonl"
    monkeypatch.setenv(REPORT_LOG_ENV, str(log))
    run_one(good_double, seed=11)
    run_one(stub_double, seed=12)
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["title"] == "Exercise 9.9 — double"
    assert (first["passed"], first["seed"]) == (True, 11)
    assert [o["status"] for o in first["outcomes"]] == ["passed"]
    assert (second["passed"], second["seed"]) == (False, 12)
    assert second["outcomes"][0]["message"] == f"not implemented yet (Exercise 9.9; raised in stub_double, line {STUB_LINE})"
    # What `python -m synclab check` rebuilds from a line is the same report.
    rebuilt = CheckReport(second["title"], [Outcome(**o) for o in second["outcomes"]], second["seed"])
    assert str(rebuilt) == str(run_one(stub_double, seed=12))


def test_no_report_log_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_one(good_double)
    assert list(tmp_path.iterdir()) == []


def test_empty_report_has_not_passed():
    assert CheckReport("nothing").passed is False
    report = run_checks("nothing", [], good_double, seed=1)
    assert report.outcomes == []
    assert report.passed is False
    assert report.summary == "nothing: 0/0 checks passed"


def test_to_dict():
    data = run_one(wrong_double, seed=8).to_dict()
    assert set(data) == {"title", "passed", "seed", "points", "earned", "outcomes", "check_function"}
    assert data["passed"] is False and data["seed"] == 8
    assert data["outcomes"][0]["status"] == "failed"
    json.dumps(data)  # JSON-able


def test_expect_helpers():
    expect(True, "fine")
    expect_equal([1, 2], [1, 2], what="list")
    with pytest.raises(CheckFailed) as info:
        expect_equal([1], [2], what="the list", hint="h", case="c")
    err = info.value
    assert (err.message, err.expected, err.got, err.hint, err.case) == ("the list differs", [2], [1], "h", "c")
    assert isinstance(err, AssertionError)
    with pytest.raises(CheckFailed, match="boom"):
        expect(False, "boom")


# ----------------------------------------------------------------------------- regressions


def test_timeout_survives_a_readers_except_exception():
    def stubborn(x):
        deadline = time.monotonic() + 1.5  # bounded: were the limit swallowed, this would return after 1.5 s (not hang)
        while time.monotonic() < deadline:
            try:
                n = 0
                while time.monotonic() < deadline:
                    n += 1
            except Exception:
                pass
        return 2 * x

    (outcome,) = run_one(stubborn, Check("9.9", "terminates", check_doubles, timeout_s=0.2)).outcomes
    assert outcome.status == "timed out"


def test_a_list_difference_is_shown_around_its_first_position_saying_what_is_left_out():
    from synclab.checks import around_first_difference

    expected, got = around_first_difference(list(range(100)) + [7, 8], list(range(100)) + [7, -1])
    assert expected == "[... 98 before, 98, 99, 7, 8] (length 102; first difference at index 101)"
    assert got == "[... 98 before, 98, 99, 7, -1] (length 102; first difference at index 101)"
    expected, got = around_first_difference([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 0, 3, 4, 5, 6, 7, 8, 9])
    assert expected == "[1, 2, 3, 4, 5, 4 after ...] (length 9; first difference at index 1)"
    assert around_first_difference([5, -1], [5])[1] == "[5] (length 1; first difference at index 1)"


# ----------------------------------------------------------------------------- hints that follow the failure


def test_when_several_checks_fail_the_report_leads_with_the_most_specific_and_drops_standing_hints():
    from synclab.checks import Check, CheckFailed, run_checks

    def generic(impl, rng):
        raise CheckFailed("a new request is skipped")  # no hint of its own: the check's standing hint applies

    def specific(impl, rng):
        raise CheckFailed("wrong row", expected=[1, 2], got=[1, 3], case="a fixed case: 2 rows")

    checks = [Check("9.1", "a new request is skipped", generic, hint="look at the code that skips new requests"),
              Check("9.1", "fixed cases", specific)]
    report = run_checks("Exercise 9.1", checks, lambda: None, seed=0)
    text = str(report)
    assert report.lead is report.outcomes[1]  # expected/got and a case: the place to start
    assert "start with [9.1] fixed cases" in text
    assert "look at the code that skips new requests" not in text  # a standing hint for another failure
    only_one = run_checks("Exercise 9.1", checks[:1], lambda: None, seed=0)
    assert "look at the code that skips new requests" in str(only_one)  # alone, its standing hint is the best lead


def test_when_the_readers_code_raises_the_report_names_the_case_it_was_given():
    from synclab.checks import Check, run_checks

    def check(impl, rng):
        for rows in ([0, 1], [2, -1]):
            case = f"rows {rows}"
            impl(rows)

    def readers(rows):
        return [["a", "b", "c"][r] for r in rows] if -1 not in rows else [].index(-1)

    report = run_checks("Exercise 9.2", [Check("9.2", "random rows", check)], readers, seed=0)
    (outcome,) = report.outcomes
    assert outcome.status == "crashed" and outcome.case == "rows [2, -1]", outcome
    matches_report_snapshot(report)


def test_a_failure_names_the_check_to_call_again_and_the_cell_as_ipython_does():
    from IPython.core.interactiveshell import InteractiveShell

    from synclab import reverse_scan as ch4
    from synclab.syncs import location

    report = ch4.check_bottleneck_model(lambda costs, device, max_length: None, seed=3)
    matches_report_snapshot(report)  # "... as ch4.check_bottleneck_model(..., seed=3)", the notebook's alias
    shell = InteractiveShell.instance()
    shell.run_cell("def in_a_cell():\n    return 1\n")
    filename = shell.user_ns["in_a_cell"].__code__.co_filename
    assert location(filename, 2) == f"Cell In[{shell.compile._filename_map[filename]}]:2"  # as its tracebacks say
    InteractiveShell.clear_instance()


def test_a_checkfailed_the_answer_raises_itself_is_a_crash_worth_nothing():
    """Red team: an answer that raised the checks' own CheckFailed with share=1.0 earned every check's points."""
    import random as _random

    from synclab import primer

    namespace: dict = {"primer": primer, "random": _random}
    exec(compile('''
def _grab():
    try:
        primer.CHECKS_0_1[1].run(lambda b: None, random.Random(0))
    except Exception as e:
        return type(e)

def decode_step(batch, _failed=_grab()):
    raise _failed("all good", share=1.0)
''', "<your cell 1>", "exec"), namespace)
    report = primer.check_decode_step(namespace["decode_step"], seed=0)
    assert report.earned == 0 and {o.status for o in report.outcomes} == {"crashed"}, str(report)
    assert "raised the checks' own CheckFailed" in report.outcomes[0].message


def test_a_checkfailed_the_package_raises_under_the_answer_is_a_failure_worth_no_share():
    """A strict collaborator the checks handed the answer raises CheckFailed while the answer is on the stack: the
    message stands (it names the fault), but no share of the points; nor for expect() called by the answer."""
    from synclab.checks import Check, expect, run_checks

    def run(impl, rng):
        impl(lambda: expect(False, "a strict collaborator refused", share=1.0))

    namespace: dict = {}
    exec(compile("def answer(collaborator):\n    collaborator()\n", "<your cell 1>", "exec"), namespace)
    report = run_checks("9.9", [Check("9.9", "strict", run)], namespace["answer"])
    (outcome,) = report.outcomes
    assert outcome.status == "failed" and outcome.message == "a strict collaborator refused" and report.earned == 0



def test_a_passed_check_has_the_witness_of_what_it_compared_and_a_comparison_only_some_passes_reach_adds_none():
    """The grader's recorder (synclab.lab.witnesses), attached through the checks' one hook: a passed check's digest
    of the values it found right; a failed one, or one that compared nothing exactly, has none."""
    from synclab.checks import Check, expect, expect_equal, run_checks
    from synclab.lab.witnesses import recording

    def compares(impl, rng):
        expect_equal(impl(), [1, 2], what="value")

    def compares_twice(impl, rng):
        expect_equal(impl(), [1, 2], what="value")
        expect_equal(impl(), [1, 2], what="again", same_for_every_pass=False)

    def compares_nothing(impl, rng):
        expect(impl() == [1, 2], "value")

    checks = [Check("9.9", "once", compares), Check("9.9", "twice", compares_twice),
              Check("9.9", "nothing", compares_nothing)]
    with recording() as recorder:
        once, twice, nothing = run_checks("t", checks, lambda: [1, 2.0]).outcomes
        failed = run_checks("t", checks[:1], lambda: [2, 1]).outcomes[0]
    assert once.ok and recorder.witness(once) and recorder.witness(twice) == recorder.witness(once)  # [1, 2.0]
    assert nothing.ok and not recorder.witness(nothing)
    assert not failed.ok and not recorder.witness(failed)


def test_nothing_is_attached_to_the_checks_where_a_learner_runs_them():
    """The checks' one hook is empty until a grader attaches its observer: importing the learner's path and a chapter
    attaches nothing."""
    import subprocess
    import sys

    probe = "import synclab.checks as c, synclab.lab.learner_check, synclab.primer\nprint(c.observer() is None)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def _reads_its_rng(run) -> bool:
    """Whether a check's function reads its second parameter (the random source), itself or in a function nested in
    it; a callable without code of its own (a partial) is taken to read it, and a wrapper around another check
    reads what that one reads."""
    import dis

    code = getattr(run, "__code__", None)
    if code is None:
        return True
    wrapped = [cell.cell_contents for cell in run.__closure__ or () if isinstance(cell.cell_contents, Check)]
    if wrapped:  # a check run on a part of the answer (3.8's two functions): what the check it runs reads
        return _reads_its_rng(wrapped[0].run)
    if code.co_argcount < 2:
        return False
    rng = code.co_varnames[1]
    return rng in code.co_cellvars or any(i.opname.startswith("LOAD") and i.argval == rng
                                          for i in dis.get_instructions(code))


def test_a_check_says_it_draws_random_cases_exactly_when_it_reads_its_random_source():
    """A failure of a random check prints the seed that replays its cases; a check that draws none must not (the
    seed explains nothing there), and the tests check it on one seed, not twenty (tests/test_wrong_versions.py)."""
    import importlib
    import pkgutil

    import synclab

    checks = {id(c): c for m in pkgutil.walk_packages(synclab.__path__, "synclab.") if ".checks" in m.name
              for value in vars(importlib.import_module(m.name)).values() if isinstance(value, list)
              for c in value if isinstance(c, Check)}
    assert len(checks) > 100
    wrong = [f"{c.task} {c.name!r}: random={c.random}" for c in checks.values() if c.random != _reads_its_rng(c.run)]
    assert not wrong, "\n".join(wrong)
    assert not _reads_its_rng(lambda impl, rng: impl(1)) and _reads_its_rng(lambda impl, rng: impl(rng.random()))


def test_a_failure_that_names_its_fault_leads_whatever_its_check_says_of_its_other_failures():
    """A race seen on the streams explains the wrong values it causes (chapter 3's refill checks): that failure leads;
    the same check failing on a wrong value alone does not."""
    def values_wrong(impl, rng):
        expect_equal(impl(1), 2, what="value", case="1")

    def race(impl, rng):
        raise CheckFailed("a host write into a pinned buffer an upload still needs", got="at line 3", names_fault=True)

    def value_only(impl, rng):
        raise CheckFailed("values differ", expected="2", got="1")

    for second, leads in ((race, "race"), (value_only, "values")):
        checks = [Check("9.9", "values", values_wrong), Check("9.9", second.__name__.replace("_", " "), second)]
        report = run_checks("Exercise 9.9", checks, lambda x: x, seed=1)
        assert report.lead is not None and report.lead.name == leads, (second, report.lead)
