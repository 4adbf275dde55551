"""The learner's check from a terminal: a lab's cells run in this process as its kernel runs them.

Used by ``python -m synclab check --task 4.1`` and ``--checks-only`` (a whole run, profiling cells included, goes
through a kernel, :mod:`synclab.lab.notebook_runner`, and reads the same reports). Nothing here grades or judges:
the lab's own check cells run, whole, with the cells they need, so a terminal and a notebook give the same verdict
on the same answer, timed checks included. The grader's path is :mod:`synclab.lab.judge`.

Which cells run, in the notebook's order: the setup cells and the reader's cells that the answers and check calls
need (every import, every cell binding a name they read), every answer cell up to the last check asked for, and
the check cells asked for. A demo or profiling cell nobody reads is left out.
"""

from __future__ import annotations

import _thread
import contextlib
import io
import json
import os
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from nbformat import NotebookNode

from synclab.checks import REPORT_LOG_ENV, CheckReport
from synclab.lab import notebook_cells as cells_of
from synclab.lab.exercises import of_chapter
from synclab.lab.notebook_runner import Stopped
from synclab.lab.verdicts import report_from_dict


@dataclass
class CellPlan:
    """The cells one check run executes: (index, source) in order, and the check cell of each task asked for."""

    chapter: str
    cells: list[tuple[int, str]]
    checks: dict[int, str]  # cell index -> the task it checks


def plan(nb: NotebookNode, tasks: list[str] | None = None) -> CellPlan:
    """What to run for ``tasks`` (every exercise of the notebook when None)."""
    chapter = cells_of.chapter_of(nb)
    if chapter is None:
        raise ValueError("this notebook calls no exercise's checks")
    check_at = cells_of.check_cells(nb, chapter)
    wanted = [e.task for e in of_chapter(chapter) if e.task in check_at and (tasks is None or e.task in tasks)]
    if not wanted:
        return CellPlan(chapter, [], {})
    last = max(check_at[t] for t in wanted)
    first = cells_of.first_exercise_cell(nb, chapter)
    own_checks = {check_at[t]: t for t in wanted}
    others_checks = set(check_at.values()) - set(own_checks)
    cells = [(index, cells_of.code(cell)) for index, cell in enumerate(nb.cells[:last + 1])
             if cell.cell_type == "code" and index not in others_checks]
    answering = [index in own_checks or index >= first and index not in check_at.values()
                 and bool(cells_of.tasks_of(nb.cells[index]) or cells_of.answers_of(source, chapter))
                 for index, source in cells]
    runs = cells_of.with_what_they_read([source for _, source in cells], answering)
    return CellPlan(chapter, [cell for cell, run in zip(cells, runs) if run], own_checks)


@dataclass
class LearnerRun:
    """The reports the check cells made, and what went wrong in the cells (``cell N: Name: message``)."""

    reports: dict[str, CheckReport] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the whole run, the setup's imports included
    checks_seconds: float = 0.0  # the check cells alone
    # what the reader's code printed: (where, text) for each answer cell and each check cell (which runs the answers)
    printed: list[tuple[str, str]] = field(default_factory=list)


def read_reports(log: str) -> dict[str, CheckReport]:
    """The reports a run appended to ``log`` (:data:`synclab.checks.REPORT_LOG_ENV`), by task: the last of each."""
    reports: dict[str, CheckReport] = {}
    for line in Path(log).read_text().splitlines() if os.path.exists(log) else []:
        report = report_from_dict(json.loads(line))
        if report.outcomes:
            reports[report.outcomes[0].task] = report
    return reports


class _CellTimedOut(Exception):
    pass


@contextlib.contextmanager
def _cell_limit(seconds: float):
    """Interrupt the main thread after ``seconds`` (a cell that never ends); a Ctrl-C of the reader's stays one."""
    fired = threading.Event()

    def interrupt() -> None:
        fired.set()
        _thread.interrupt_main()

    timer = threading.Timer(seconds, interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    except KeyboardInterrupt:
        if fired.is_set():
            raise _CellTimedOut() from None
        raise
    finally:
        timer.cancel()


def run_here(nb: NotebookNode, tasks: list[str] | None = None, cell_timeout_s: float = 120.0,
             quiet: bool = True) -> LearnerRun:
    """Run the cells :func:`plan` chooses in a fresh namespace of this process, as a kernel would; their reports.

    A cell that raises is named (``cell N: ...``) and the next one runs, as in a notebook run top to bottom. What the
    cells print is kept out of the terminal's report (``quiet``): the check cells' reports are read back instead, and
    what the reader's own code printed (in an answer cell, or called by a check) is kept apart, for a report to show.
    """
    chosen = plan(nb, tasks)
    run = LearnerRun()
    namespace: dict = {"__name__": "__main__"}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="synclab-check-") as tmp:
        log = os.path.join(tmp, "reports.jsonl")
        previous = os.environ.get(REPORT_LOG_ENV)
        os.environ[REPORT_LOG_ENV] = log
        try:
            for index, source in chosen.cells:
                filename = cell_filename(index, source, chosen.chapter)
                _remember(filename, source)
                began = time.perf_counter()
                out = io.StringIO()
                try:
                    with _cell_limit(cell_timeout_s), \
                            (contextlib.redirect_stdout(out) if quiet else contextlib.nullcontext()):
                        exec(compile(source, filename, "exec", dont_inherit=True), namespace)  # not our __future__
                except _CellTimedOut:
                    run.errors.append(f"cell {index}: timed out after {cell_timeout_s:g} s")
                except SyntaxError as exc:
                    run.errors.append(f"cell {index}: SyntaxError: {exc.msg} (line {exc.lineno})")
                except Stopped:  # Ctrl-C or a kill: the check stops, no later cell runs
                    raise
                except Exception as exc:  # noqa: BLE001 - the reader's cell raised: named, the next one runs
                    run.errors.append(f"cell {index}: {type(exc).__name__}: {exc}{_where(exc, filename)}")
                if index in chosen.checks:
                    run.checks_seconds += time.perf_counter() - began
                    if out.getvalue():
                        run.printed.append((f"while Exercise {chosen.checks[index]}'s checks ran it", out.getvalue()))
                elif out.getvalue() and filename.startswith("<your "):  # an answer cell (cell_filename)
                    run.printed.append((f"in {filename.strip('<>')}", out.getvalue()))
        finally:
            if previous is None:
                os.environ.pop(REPORT_LOG_ENV, None)
            else:
                os.environ[REPORT_LOG_ENV] = previous
        run.reports = read_reports(log)
    run.seconds = time.perf_counter() - started
    return run


def cell_filename(index: int, source: str, chapter: str) -> str:
    """The name a cell's code runs under, which sync reports and tracebacks quote: the exercise it answers where it
    defines one's names (``<your Exercise 0.1 cell>:4``: a notebook shows no cell numbers), else its place."""
    answers = sorted(cells_of.answers_of(source, chapter))
    return f"<your Exercise {' and '.join(answers)} cell>" if answers else f"<cell {index}>"


def _remember(filename: str, source: str) -> None:
    """Let tracebacks and the sync counter quote the cell's lines, as they do in a kernel."""
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _where(exc: BaseException, filename: str) -> str:
    lines = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    return f" (line {lines[-1].lineno})" if lines else ""
