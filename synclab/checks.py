"""Run a chapter's checks against any implementation and report, case by case.

Introduced in chapter 0 (the primer); every chapter module defines its checks with it.

A check is a function ``check(impl, rng)`` that calls the reader's implementation
and raises :class:`CheckFailed` (with what was expected, what came back and a
hint) when it is wrong. :func:`run_checks` runs each check with a time limit and
turns every way an implementation can go wrong (wrong answer, exception,
``NotImplementedError`` from a stub, an endless loop) into one readable line:
never a wall of traceback, never a hang. Random cases draw from a fresh seed on
every run, printed on failure so the case can be replayed with ``seed=...``.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from html import escape
from typing import Any, Callable, Iterator, Protocol

from synclab.answer_keys import answer_in, checking, is_readers_code
from synclab.run_modes import failing_checks_raise
from synclab.answer_keys.stored import public_seeds

# CheckReport.summary, read back: "...: 4/5 checks passed" or "...: 3/4 checks passed (3/5 points)".
_SUMMARY = re.compile(r": (?P<ok>\d+)/(?P<n>\d+) checks passed(?: \((?P<earned>[\d.]+)/(?P<points>\d+) points\))?")


def parse_summary(text: str) -> tuple[int, int, int] | None:
    """(checks passed, checks, points) from a report's summary line (e.g. a stored output); None if absent."""
    found = _SUMMARY.search(text)
    if found is None:
        return None
    return int(found["ok"]), int(found["n"]), int(found["points"] or found["n"])


# When set (by ``python -m synclab check``), every report is also appended here as one JSON line.
REPORT_LOG_ENV = "SYNCLAB_CHECK_LOG"
# Scales every time limit of the checks (tests of the limits themselves run them at a tenth).
TIME_SCALE_ENV = "SYNCLAB_CHECK_TIME_SCALE"


# How a check waiting on another (Check.after) says it was skipped: the report tells such a skip from a stub's by it
WAITS_ON = "counts once"


class CheckFailed(AssertionError):
    """Raised by a check: the implementation answered, but wrongly."""

    def __init__(self, message: str, *, expected: Any = None, got: Any = None, hint: str = "", case: str = "",
                 share: float = 0.0, names_fault: bool | None = None):
        super().__init__(message)
        self.message, self.expected, self.got, self.hint, self.case = message, expected, got, hint, case
        self.share = share  # the part of the check's points the answer still earns (a check of several clauses)
        # this failure names the fault itself (a race seen on the streams), whatever its check's Check.names_fault
        # says of its other failures (a wrong value): None leaves the check's
        self.names_fault = names_fault


class CheckTimeout(BaseException):
    """Not an Exception: a reader's ``except Exception`` must not swallow the time limit.

    Raised by the time limit itself, or by a check whose own wait ran out (``message``, ``hint``:
    what did not answer, and what usually causes it).
    """

    def __init__(self, message: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def expect(condition: bool, message: str, *, expected: Any = None, got: Any = None, hint: str = "", case: str = "",
           share: float = 0.0) -> None:
    """Fail the current check with a readable message unless ``condition`` holds.

    ``share``: for a check of several independent clauses (predictions, a contract's cases), the part of its points
    the clauses that held still earn.
    """
    if not condition:
        raise CheckFailed(message, expected=expected, got=got, hint=hint, case=case, share=share)


def expect_equal(got: Any, expected: Any, *, what: str, hint: str = "", case: str = "",
                 same_for_every_pass: bool = True) -> None:
    """Fail unless ``got == expected`` (plain Python values: lists, ints, tuples); a value found right is reported to
    an attached observer (:func:`found_right`) unless ``same_for_every_pass`` is False: a comparison only some of the
    answers that pass the check reach."""
    if got != expected:
        raise CheckFailed(f"{what} differs", expected=expected, got=got, hint=hint, case=case)
    if same_for_every_pass:
        found_right(got)


# ----------------------------------------------------------------------------- the one hook a grader attaches
# The checks run the same wherever they run, and keep no record of their own beyond the report. A grader may attach
# one observer (synclab.lab.witnesses does): it sees each check start and end, and each result a check compared
# exactly and found right. Nothing here reads what it keeps, and a run without one is the learner's.


class CheckObserver(Protocol):
    """What a grader attaches with :func:`attach_observer`."""

    def seed(self) -> int | None:
        """The seed to draw random cases from when the caller gave none (None: a fresh one)."""

    def check_started(self, check: "Check") -> None: ...

    def found_right(self, value: Any, exact_tensor: bool) -> None:
        """A result the running check compared exactly and found right (``exact_tensor``: a tensor, dtype and all)."""

    def check_ended(self, check: "Check", outcome: "Outcome") -> None: ...

    def for_child(self) -> Callable[[], Callable[[], list[str]]] | None:
        """For a process the checks start (chapter 3's ranks): a picklable callable it runs before any of the
        reader's code, which returns what tells the process's lines for :meth:`child_saw`; None: nothing to run."""

    def child_saw(self, lines: list[str]) -> None:
        """What such a process reported, for the grader's record."""


_OBSERVER: list[CheckObserver] = []  # at most one


def attach_observer(observer: CheckObserver | None) -> None:
    """Attach ``observer`` to every check run from now on (None: detach it)."""
    _OBSERVER[:] = [observer] if observer is not None else []


def observer() -> CheckObserver | None:
    """The attached observer, if any (chapter 3's ranks hand it on to their processes)."""
    return _OBSERVER[0] if _OBSERVER else None


def found_right(value: Any) -> None:
    """Tell an attached observer that the running check compared ``value`` exactly and found it right. Only values
    every answer that passes the check gives alike (the case's expected result, not a tolerance's neighbour)."""
    if _OBSERVER:
        _OBSERVER[0].found_right(value, False)


def found_right_tensor(t: Any) -> None:
    """:func:`found_right` for a tensor compared exactly, dtype and shape included (``None``: an absent one)."""
    if _OBSERVER:
        _OBSERVER[0].found_right(t, t is not None)


def keyed_by_name(answers: dict, names: list[str]) -> dict:
    """``answers`` keyed by the full names in ``names``; a key may also be a name's label before its colon
    (``"a"`` for ``"a: x[2:9].sum()"``). Keys that match no name are kept as they are (the check names them)."""
    labels = {name.split(":")[0].strip(): name for name in names}
    return {labels.get(k, k) if isinstance(k, str) else k: v for k, v in answers.items()}


def around_first_difference(expected: list, got: list, width: int = 3) -> tuple[str, str]:
    """Two short renderings of ``expected`` and ``got`` around their first difference, saying what is left out.

    ``[... 57 before, 3, 3, 7, 8]``: the elements around the first index where the two differ
    (or where one ends), with how many are elided on each side, at the same positions in both.
    """
    first = next((i for i, (e, g) in enumerate(zip(expected, got)) if e != g), min(len(expected), len(got)))
    start = max(0, first - width)

    def render(values: list) -> str:
        end = min(len(values), first + width + 1)
        parts = [f"... {start} before"] if start else []
        parts += [repr(v) for v in values[start:end]]
        if end < len(values):
            parts.append(f"{len(values) - end} after ...")
        return f"[{', '.join(parts)}] (length {len(values)}; first difference at index {first})"

    return render(expected), render(got)


CHECK_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@dataclass(frozen=True)
class Check:
    """One named property of the task ``task`` (e.g. ``"0.1"``)."""

    task: str
    name: str
    run: Callable[[Callable[..., Any], random.Random], None]
    hint: str = ""  # shown when the check fails without a more specific hint
    timeout_s: float = 30.0
    points: int = 1  # what passing it is worth when graded (python -m synclab check --json, nbgrader)
    random: bool = True  # whether it draws random cases (a failure then prints the seed that replays them)
    names_fault: bool = False  # its failure names the fault itself (not only a wrong value): read it first
    # (text in the error, its kind included, hint): a crash explained; a hint may be a function of the error's text
    # and where it was raised ("KeyError: 'x' (in stopped_on_host, line 3: ...)"), "" when it has nothing to say
    crash_hints: tuple[tuple[str, str | Callable[[str], str]], ...] = ()
    # the check (its id) whose pass this one's points wait for: a property (in place, few syncs, little work) that an
    # answer doing nothing has too counts once the answer is right
    after: str = ""
    # what the check is, apart from its wording: ``"fixed-cases"``, unique within its task (``key``: "4.1/fixed-cases").
    # Dependencies, the grader's witnesses, clauses and tests name a check by it; its name may be reworded freely.
    id: str = ""

    def __post_init__(self) -> None:
        if self.id and not CHECK_ID.fullmatch(self.id):
            raise ValueError(f"check id {self.id!r}: lower-case words joined by '-' (e.g. 'fixed-cases')")

    @property
    def key(self) -> str:
        return f"{self.task}/{self.id}"


@dataclass(frozen=True)  # a verdict is not edited after the fact, by the reader's code least of all
class Outcome:
    task: str
    name: str
    status: str  # "passed" | "failed" | "not implemented" | "crashed" | "timed out" | "skipped"
    message: str = ""
    expected: str = ""
    got: str = ""
    hint: str = ""
    case: str = ""
    points: int = 1
    generic_hint: bool = False  # the check's (or the status's) standing hint, not one raised for this failure
    random: bool = True  # the check draws random cases
    names_fault: bool = False  # the check's failure names the fault itself (Check.names_fault)
    refused: str = ""  # the package's answer the reader's code called or handed in (its name), if any
    share: float = 0.0  # a failed check of several clauses: the part of its points the clauses that held earn
    check_id: str = ""  # the check's id (Check.id): what it is, whatever its name says

    @property
    def key(self) -> str:
        """What names the check in a record (a grader's witnesses): its id, or its name where it has none."""
        return f"{self.task}/{self.check_id}" if self.check_id else self.name

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    @property
    def specific(self) -> int:
        """How much this failure says about the fault: a case with expected and got says most."""
        return ((self.status == "failed") * (4 + 8 * self.names_fault) + bool(self.expected and self.got) * 2
                + bool(self.case))

    @property
    def earned(self) -> float:
        """Its points if it passed; if it failed, the share its clauses that held earn; else 0. A failure, crash or
        time-out costs this check alone."""
        if self.ok:
            return self.points
        return round(self.points * self.share, 4) if self.status == "failed" else 0


_ICONS = {"passed": "✓", "failed": "✗", "not implemented": "…", "crashed": "✗", "timed out": "⏱", "skipped": "–"}
EXERCISE_LIMIT_S = 60.0  # all of one exercise's checks together; a check's own limit is Check.timeout_s
AFTER_TIMEOUT_S = 5.0  # a check's limit once an earlier check of its exercise timed out


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class CheckReport:
    """The outcomes of one :func:`run_checks`; renders as a table in notebooks, text in terminals."""

    title: str
    outcomes: list[Outcome] = field(default_factory=list)
    seed: int = 0
    check_function: str = ""  # the public function the notebook called (``ch4.check_bottleneck_model``)

    @property
    def passed(self) -> bool:
        return bool(self.outcomes) and all(o.ok for o in self.outcomes)

    @property
    def random_cases_matter(self) -> bool:
        """Whether to print the seed: something failed in a way a random case may explain."""
        return any(o.random and o.status in ("failed", "crashed", "timed out") for o in self.outcomes)

    @property
    def points(self) -> int:
        return sum(o.points for o in self.outcomes)

    @property
    def earned(self) -> float:
        return round(sum(o.earned for o in self.outcomes), 4)

    @property
    def summary(self) -> str:
        n_ok = sum(o.ok for o in self.outcomes)
        partial = any(o.earned and not o.ok for o in self.outcomes)
        shown = partial or (n_ok < len(self.outcomes) and self.points != len(self.outcomes))
        # "0/1 checks passed (83.3% ...)" reads as a contradiction: a check that earned part of its points did not
        # pass in full
        passed = "checks passed in full" if partial else "checks passed"
        return f"{self.title}: {n_ok}/{len(self.outcomes)} {passed}{f' {self.points_said()}' if shown else ''}"

    def points_said(self) -> str:
        """``(60% of the exercise's points)``: what the summary says of the points, as a share, so that it agrees with
        any scale (the checks' weights are not the exercise's points: a grader's report says those,
        :class:`synclab.lab.verdicts.Verdict`)."""
        return f"({100 * self.earned / self.points:.3g}% of the exercise's points)" if self.points else ""

    @property
    def lead(self) -> Outcome | None:
        """The failure to start from when several checks failed: the most specific one, else the first."""
        failed = [o for o in self.outcomes if not o.ok and o.status != "skipped"]
        if len(failed) < 2:
            return None
        return max(failed, key=lambda o: o.specific)  # max keeps the first of equals

    def _details(self, o: Outcome, shown_hints: set[str]) -> list[tuple[str, str]]:
        """What to print under a failed check: a standing hint only once, and only on the lead failure (if any)."""
        lead = self.lead
        hint = o.hint
        if hint and (hint in shown_hints or (o.generic_hint and lead is not None and o is not lead)):
            hint = ""
        if hint:
            shown_hints.add(hint)
        return [(k, v) for k, v in (("case", o.case), ("", o.message), ("expected", o.expected), ("got", o.got),
                                    ("hint", hint)) if v]

    @property
    def not_started(self) -> str | None:
        """One line for an exercise not started (every check met its stub), instead of a line per check."""
        # a check that waits on another (Check.after) met no stub, but its skip says no more than the stub did
        met = [o for o in self.outcomes if not (o.status == "skipped" and o.message.startswith(WAITS_ON))]
        if not met or any(o.status != "not implemented" for o in met):
            return None
        n = len(self.outcomes)
        checks = f"its {n} checks run" if n > 1 else "its check runs"
        return f"{self.title}: {met[0].message}; {checks} once it is written"

    def __str__(self) -> str:
        if self.not_started:
            return self.not_started
        lines = [self.summary]
        lead, shown = self.lead, set()
        if lead is not None:
            lines.append(f"  start with [{lead.task}] {lead.name}: it says most about what went wrong")
        for o in self.outcomes:
            lines.append(f"  {_ICONS[o.status]} [{o.task}] {o.name}" + ("" if o.ok else f": {o.status}"))
            if not o.ok:
                for label, text in self._details(o, shown):
                    if "\n" in text:  # a stream log, a table: its lines under the label, aligned with each other
                        lines.append(f"      {label + ':' if label else ''}")
                        lines.extend(f"        {line}" for line in text.splitlines())
                    else:
                        lines.append(f"      {label + ': ' if label else ''}{text}")
        if self.random_cases_matter:
            call = f"{self.check_function}(..., seed={self.seed})" if self.check_function else f"seed={self.seed}"
            lines.append(f"  random cases used seed={self.seed}: to replay them, run the check cell again (in the "
                         f"notebook) as {call}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        if self.not_started:
            return f"<div><b style='color:#8a6d3b'>{escape(self.not_started)}</b></div>"
        color = "#2e7d32" if self.passed else "#c62828"
        rows = []
        lead, shown = self.lead, set()
        for o in self.outcomes:
            detail = ""
            if not o.ok:
                parts = self._details(o, shown)
                if o is lead:
                    parts.insert(0, ("start here", "this failure says most about what went wrong"))
                detail = "<br>".join(f"<b>{k}</b> <code style='white-space:pre'>{escape(v)}</code>" if k else escape(v)
                                    for k, v in parts)
            rows.append(
                f"<tr><td>{_ICONS[o.status]}</td><td>{escape(o.task)}</td><td>{escape(o.name)}</td>"
                f"<td>{escape(o.status)}</td><td style='text-align:left'>{detail}</td></tr>"
            )
        seed = f"<div><small>random cases used seed={self.seed}</small></div>" if self.random_cases_matter else ""
        return (
            f"<div><b style='color:{color}'>{escape(self.summary)}</b>"
            "<table><tr><th></th><th>task</th><th>check</th><th>status</th><th>details</th></tr>"
            + "".join(rows) + f"</table>{seed}</div>"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "passed": self.passed, "seed": self.seed, "points": self.points,
                "earned": self.earned, "outcomes": [asdict(o) for o in self.outcomes],
                "check_function": self.check_function}


# ----------------------------------------------------------------------------- running one check


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (SIGALRM: only possible on the main thread, POSIX)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise CheckTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)  # and again every 0.5 s, should one be swallowed
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _where_in_user_code(exc: BaseException, with_code: bool = True) -> str:
    """The deepest traceback line outside synclab and torch: where the reader's code broke (and, ``with_code``, the
    line's text)."""
    here = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(here) and "site-packages" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f"in {f.name}, line {f.lineno}: {f.line}" if f.line and with_code else f"in {f.name}, line {f.lineno}"


def _case_of(exc: BaseException, check: Check) -> str:
    """The case a check was running when the reader's code raised: its innermost ``case`` string.

    Checks name their inputs in a local ``case`` (``case = f"3 requests of {lens}"``) to report a
    failure; the same name tells which input made the reader's code raise. Only the frames of
    synclab and of the check's own module are read, never the reader's.
    """
    run = getattr(check.run, "__code__", None)
    homes = (os.path.dirname(os.path.abspath(__file__)),)
    if run is not None and os.path.isabs(run.co_filename):  # not a check written in a notebook cell
        homes += (os.path.dirname(run.co_filename),)
    found = ""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.startswith(homes):
            case = frame.f_locals.get("case")
            if isinstance(case, str) and case:
                found = case
        tb = tb.tb_next
    return _short(found, 200)


def _run_guarded(check: Check, impl: Callable[..., Any], seed: int, limit_s: float) -> Outcome:
    base = {"task": check.task, "name": check.name, "points": check.points, "random": check.random,
            "names_fault": check.names_fault, "check_id": check.id}
    # the cases a seed draws follow the check's identity (its key), not its wording: a reworded name draws the same
    rng = random.Random(f"{seed}/{check.key}" if check.id else f"{seed}/{check.task}/{check.name}")
    try:
        with _time_limit(limit_s):
            check.run(impl, rng)
    except CheckFailed as exc:
        frames = _frames_of(exc)
        if frames and is_readers_code(frames[-1]):  # the checks' own exception, raised by the answer: a crash
            return Outcome(**base, status="crashed", message=f"your code raised the checks' own CheckFailed "
                           f"({exc.message!r}): only a check says a case failed, and how much it still earns",
                           hint="raise an exception of your own (ValueError, ...) where the contract asks for one",
                           case=exc.case)
        # Raised by the package while the answer was on the stack (a strict collaborator the checks handed it, or
        # the package's expect() called by the answer): a failure, but never a share of the points
        under_the_answer = any(is_readers_code(filename) for filename in frames)
        if exc.names_fault is not None:
            base["names_fault"] = exc.names_fault
        return Outcome(**base, status="failed", message=exc.message,
                       expected=_short(exc.expected) if exc.expected is not None else "",
                       got=_short(exc.got) if exc.got is not None else "",
                       hint=exc.hint or check.hint, case=exc.case or _case_of(exc, check), generic_hint=not exc.hint,
                       share=0.0 if under_the_answer else min(max(float(exc.share), 0.0), 1.0))
    except NotImplementedError as exc:
        # An answer written in part (chapter 6's stub has a stub per hook) is told which part still raises
        where = _where_in_user_code(exc, with_code=False)
        said = "; ".join(part for part in (str(exc), f"raised {where}" if where else "") if part)
        return Outcome(**base, status="not implemented",
                       message=f"not implemented yet ({said})" if said else "not implemented yet")
    except CheckTimeout as exc:
        return Outcome(**base, status="timed out", message=exc.message or f"no answer within {limit_s:g} s",
                       hint=exc.hint or "look for a loop that never ends, or work that grows much faster than the input",
                       case=_case_of(exc, check), generic_hint=not exc.hint)
    except Exception as exc:  # the reader's code raised: one line, not a traceback
        where = _where_in_user_code(exc)
        said = f"{type(exc).__name__}: {exc}"  # a crash hint may name the exception's kind (an AssertionError)
        message = said + (f" ({where})" if where else "")
        explained = next((hint(message) if callable(hint) else hint
                          for text, hint in check.crash_hints if text in said), "")
        if not explained and isinstance(exc, NameError):
            explained = _UNDEFINED_NAME_HINT
        return Outcome(**base, status="crashed", message=message, hint=explained or check.hint,
                       case=_case_of(exc, check), generic_hint=not explained)
    return Outcome(**base, status="passed")


# A notebook's check cell sees every name the cells above it made; the terminal's check and the grader run the answer
# cells after the setup cells alone (a learner's 6.3 read a profile cell's variable: right there, a crash here).
_UNDEFINED_NAME_HINT = ("a name your answer reads is not defined where it ran: the terminal's check and the grader run "
                        "your answer cells after the lab's setup cells alone, not the cells between them (the "
                        "profile's, your scratch cells), so compute or import what your answer needs inside it")


def _frames_of(exc: BaseException) -> list[str]:
    """The file of each frame ``exc`` passed through, from the check down to the raise."""
    files, tb = [], exc.__traceback__
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return files


def _run_one(check: Check, impl: Callable[..., Any], seed: int, limit_s: float) -> Outcome:
    """One check, with the exercise's answers out of the reader's reach (:mod:`synclab.answer_keys`)."""
    handed = answer_in(impl, check.task)
    if handed is not None:  # the answer itself handed to the check
        return Outcome(check.task, check.name, "failed", message=handed.message(handed=True), hint=handed.hint(),
                       points=check.points, random=False, refused=handed.name, check_id=check.id)
    if _OBSERVER:
        _OBSERVER[0].check_started(check)
    with checking(check.task) as watch:
        outcome = _run_guarded(check, impl, seed, limit_s)
    if watch.refused:  # even if the reader's code caught the refusal
        key = watch.refused[0]
        outcome = Outcome(check.task, check.name, "failed", message=key.message(), hint=key.hint(),
                          points=check.points, case=outcome.case, random=False, refused=key.name, check_id=check.id)
    if _OBSERVER:
        _OBSERVER[0].check_ended(check, outcome)
    return outcome


def _public_check_function() -> str:
    """The chapter's ``check_*`` function that called :func:`run_checks`, named as its caller imported the chapter."""
    frame = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            break
        module, function = frame.f_globals.get("__name__", ""), frame.f_code.co_name
        if function.startswith("check_") and module.startswith("synclab."):
            package = sys.modules.get(".".join(module.split(".")[:2]))
            caller = {**frame.f_back.f_globals, **frame.f_back.f_locals} if frame.f_back is not None else {}
            alias = next((name for name, value in caller.items() if value is package), None)  # "ch4" in a notebook
            return f"{alias}.{function}" if alias else function
        frame = frame.f_back
    return ""


def run_checks(title: str, checks: list[Check], impl: Callable[..., Any], seed: int | None = None,
               limit_s: float = EXERCISE_LIMIT_S, skip_after_timeout: bool = False) -> CheckReport:
    """Run every check against ``impl``; a fresh random seed unless ``seed`` is given.

    Time limits: each check its own (``Check.timeout_s``), all of them together ``limit_s``.
    A check that times out costs its own points only: the later checks still run, each with at
    most :data:`AFTER_TIMEOUT_S` (an endless loop in the reader's code would only time out again,
    and a loop on one kind of case must not cost the others). Checks the exercise's ``limit_s``
    leaves no time for are skipped, and so are all checks after a time-out with ``skip_after_timeout``
    (for checks that cannot run once one has hung: chapter 3's ranks are stopped by a hang).
    """
    if seed is None and _OBSERVER:  # a grader's: a right answer runs the same cases
        seed = _OBSERVER[0].seed()
    public = public_seeds(checks[0].task) if seed is None and checks else None
    if public:  # a students' install that stores the answers of the public cases instead of shipping them
        seed = random.SystemRandom().choice(public)
    seed = random.SystemRandom().randrange(10**6) if seed is None else seed
    checks = tuple(checks)  # the list the exercise declared stays as it was, whatever the reader's code reaches
    scale = float(os.environ.get(TIME_SCALE_ENV, "1"))
    limit_s *= scale
    outcomes: list[Outcome] = []
    started = time.monotonic()
    for check in checks:
        left = limit_s - (time.monotonic() - started)
        stalled = skip_after_timeout and any(o.status == "timed out" for o in outcomes)
        if left <= 0 or stalled:
            reason = ("an earlier check of this exercise timed out" if stalled
                      else f"the exercise's {limit_s:g} s were used up")
            outcomes.append(Outcome(check.task, check.name, "skipped", points=check.points, message=f"not run: {reason}",
                                    check_id=check.id))
            continue
        limit = min(check.timeout_s * scale, left)
        if any(o.status == "timed out" for o in outcomes):
            limit = min(limit, AFTER_TIMEOUT_S * scale)
        outcome = _run_one(check, impl, seed, limit)
        first = next((o for o in outcomes if o.check_id == check.after), None) if check.after else None
        if outcome.ok and first is not None and not first.ok:
            outcome = Outcome(check.task, check.name, "skipped", points=check.points, check_id=check.id,
                              message=f"{WAITS_ON} \"{first.name}\" passes: an answer that does nothing has this "
                                      "property too")
        outcomes.append(outcome)
    return _reported(CheckReport(title=title, outcomes=outcomes, seed=seed, check_function=_public_check_function()))


def _reported(report: CheckReport) -> CheckReport:
    """Record how the exercise ended in this kernel (and in the check log, when one is kept); return the report.

    Under ``pytest --nbval`` (:func:`synclab.run_modes.failing_checks_raise`) a failed check raises
    :class:`ChecksDidNotPass` once the report is shown, so that nbval fails the cell."""
    EXERCISE_STATUS.update(exercise_status(report.outcomes))
    log = os.environ.get(REPORT_LOG_ENV)
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(report.to_dict()) + "\n")
    if failing_checks_raise() and any(o.status in ("failed", "crashed", "timed out") for o in report.outcomes):
        print(report)
        raise ChecksDidNotPass(f"{report.summary}: the report above says which, and why")
    return report


class ChecksDidNotPass(AssertionError):
    """A check cell's checks did not all pass, under ``pytest --nbval``: the cell fails, as nbval shows it."""


# ----------------------------------------------------------------------------- what the reader has finished

# How each exercise's latest checks ended in this kernel. Profiling cells look here before they call the
# reader's code: a stub would raise, and an exercise whose checks timed out would hang a second time.
EXERCISE_STATUS: dict[str, str] = {}
_TASK_IN_NAME = re.compile(r"\((\d+\.\d+)")  # "AllPool (1.1, #41163)": the variant the reader writes in 1.1


def exercise_status(outcomes: list[Outcome]) -> dict[str, str]:
    """Per task: "passed", or the worst of "timed out", "not implemented", "failed" among its checks."""
    status: dict[str, str] = {}
    for task in dict.fromkeys(o.task for o in outcomes):
        kinds = {o.status for o in outcomes if o.task == task}
        status[task] = next((k for k in ("timed out", "not implemented") if k in kinds),
                            "passed" if kinds == {"passed"} else "failed")
    return status


def unfinished(task: str) -> str | None:
    """Why Exercise ``task`` cannot be profiled yet (one line), or None once it passed its checks."""
    status = EXERCISE_STATUS.get(task)
    if status == "passed":
        return None
    if status is None:
        return f"run Exercise {task}'s check cell first"
    if status == "not implemented":
        return f"Exercise {task} is not written yet"
    if status == "timed out":
        return f"Exercise {task} timed out in its checks: fix it first (it is not called again here, so nothing hangs)"
    return f"Exercise {task} does not pass its checks yet: fix it first"


def ready(*tasks: str) -> bool:
    """True when every one of ``tasks`` passed its checks in this kernel; else one line per task that did not."""
    reasons = [reason for task in tasks if (reason := unfinished(task))]
    for reason in reasons:
        print(f"skipped: {reason}.")
    return not reasons


def finished(variants: dict[str, Any]) -> dict[str, Any]:
    """The variants to profile: those whose name names no exercise ("baseline") or one that passed its checks.

    A name says which exercise adds the variant: ``"AllPool (1.1, #41163)"`` needs 1.1.
    Each one left out gets one line naming that exercise, so a lab with its core
    exercises done (and a stretch not) still profiles what it has.
    """
    kept = {}
    for name, impl in variants.items():
        found = _TASK_IN_NAME.search(name)
        reason = unfinished(found.group(1)) if found else None
        if reason:
            print(f"{name} left out: {reason}.")
        else:
            kept[name] = impl
    return kept


# ----------------------------------------------------------------------------- the clause table of an exercise


@dataclass(frozen=True)
class Clause:
    """One clause of an exercise's contract, tied to what shows it held or broke (``tests/test_clauses.py``).

    ``phrase``: the clause's words as the page's *The lab* and the lab's exercise both state them (``lab``: the lab's
    words, where it states the clause in other words than the page); ``check``: the id of the check that exercises
    it (:attr:`Check.id`), on the fixed case whose ``case`` text this is; ``wrong``: the honest mistake that breaks it
    (``tests/honest/wrong/<wrong>.py``), whose failure in that check must hold ``says``. ``also``: the other checks
    the same mistake fails as a consequence (a wrong value is wrong wherever a check compares values), by id.
    """

    id: str  # "0.1-finish": the task, then a word
    phrase: str
    check: str
    case: str
    wrong: str
    says: str
    also: tuple[str, ...] = ()
    lab: str = ""

    @property
    def task(self) -> str:
        return self.id.split("-")[0]
