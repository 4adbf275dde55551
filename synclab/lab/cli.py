"""``python -m synclab``: check a lab from the terminal, regenerate labs, record benchmarks.

    python -m synclab check labs/00_primer.ipynb   # run a notebook, report its checks (exit 0: all pass)
    python -m synclab check labs/04_....ipynb --task 4.1   # one exercise: only the cells it needs, in this process
    python -m synclab check labs/00_primer.ipynb --json   # the report as JSON, with points
    python -m synclab check labs/03_....ipynb --checks-only   # every exercise, without the profiling cells
    python -m synclab grade labs/04_....ipynb --verify   # the grader's verdicts (each exercise in its own process)
    python -m synclab labs [--check] [--force]      # regenerate labs from solutions / verify they are fresh
    python -m synclab labs --nbgrader COURSE [ch0 ...]   # nbgrader source assignments for a class
    python -m synclab bench ch0                     # run a chapter's profiling on this device, save results
    python -m synclab measure [ch0 ...]             # the deliberate CPU run: re-execute solutions, store outputs
    python -m synclab autograde ch3 --jobs 8        # in a course folder: nbgrader autograde, 8 students at a time
    python -m synclab autograde-times [ch0 ...]     # time nbgrader autograding each chapter's solution
    python -m synclab student-image DEST            # the students' install: package, data, labs; no solutions
    python -m synclab expected [4.2 ...]            # the public cases' answers the students' install stores
    python -m synclab new-chapter SLUG [--title T]  # a new chapter's skeleton from templates/, registered
    python -m synclab stop-checks                   # end the warm check server now (else after 15 idle minutes)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from synclab.lab.chapters import CHAPTERS

ROOT = Path(__file__).resolve().parents[2]


def chosen_chapters(names: list[str]) -> dict[str, str] | None:
    """``chapter -> notebook stem`` for ``names`` (all chapters when empty); None, said on stderr, if one is unknown."""
    unknown = [c for c in names if c not in CHAPTERS]
    if unknown:
        print(f"unknown chapter(s) {', '.join(unknown)}; choose from {', '.join(CHAPTERS)}", file=sys.stderr)
        return None
    return {c: CHAPTERS[c] for c in names or CHAPTERS}


def solution_of(notebook: Path, nb: Any) -> str:
    """The solution ``nb`` (read from ``notebook``) was generated from, relative to the repository."""
    return nb.metadata.get("synclab", {}).get("generated_from") or f"solutions/{notebook.name}"


def pristine_lab(notebook: Path, nb: Any) -> Any | None:
    """The lab as generated, for the grader's trusted setup cells; None where the solutions are not installed
    (a students' install): the notebook's own setup cells are used then."""
    from synclab.lab import labgen
    import nbformat

    source = solution_of(notebook, nb)
    if not (ROOT / source).exists():
        return None
    return labgen.generate_lab(nbformat.read(ROOT / source, as_version=4), source)


def _read_lab(path: str) -> tuple[Path, Any] | None:
    import nbformat

    notebook = Path(path)
    if not notebook.exists():
        print(f"no such notebook: {notebook}", file=sys.stderr)
        return None
    return notebook, nbformat.read(notebook, as_version=4)


def cmd_serve_checks(args: argparse.Namespace) -> int:
    """The warm check server: what a check imports, then a forked child per check (:mod:`.check_server`)."""
    from synclab.lab import check_server
    from synclab.lab.chapters import PACKAGES

    return check_server.serve(Path(args.socket), main, ["synclab.lab.learner_check", "synclab.lab.notebook_runner",
                                                        *PACKAGES.values()])


def cmd_stop_checks(args: argparse.Namespace) -> int:
    """End the warm check servers now instead of after their idle minutes."""
    from synclab.lab import check_server

    stopped = check_server.stop_servers(every=args.all)
    print(f"stopped {stopped} check server{'s' * (stopped != 1)}" if stopped else
          "no check server was running" + ("" if args.all else " for this checkout's Python"))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """The learner's check: the lab's own check cells, run as the notebook runs them (:mod:`.learner_check`)."""
    from synclab.checks import REPORT_LOG_ENV
    from synclab.lab import check_server
    from synclab.lab.exercises import of_chapter
    from synclab.lab.learner_check import read_reports, run_here
    from synclab.lab.notebook_cells import chapter_of, check_cells
    from synclab.lab.notebook_runner import Stopped, run_notebook

    if (args.task or args.checks_only) and check_server.enabled() and not check_server.SERVED:
        served = check_server.run_served(args.argv)
        if served is not None:  # a warm Python ran it, in this terminal (synclab.lab.check_server)
            return served
    read = _read_lab(args.notebook)
    if read is None:
        return 2
    notebook, nb = read
    chapter = chapter_of(nb)
    if chapter is None:
        if args.task or args.checks_only:
            print(f"{notebook} calls no exercise's checks", file=sys.stderr)
            return 2
        run = run_notebook(notebook, {}, cell_timeout_s=args.timeout, notebook_timeout_s=args.notebook_timeout)
        print("no checks ran in this notebook" + (": " + "; ".join(run.errors[:3]) if run.errors else ""))
        return 1
    tasks = [e.task for e in of_chapter(chapter)]
    if args.task and args.task not in tasks:
        print(f"cannot check exercise {args.task} alone: no exercise {args.task} in this lab; its exercises: "
              f"{', '.join(tasks)}", file=sys.stderr)
        return 2
    asked = [args.task] if args.task else [t for t in tasks if t in check_cells(nb, chapter)]
    kernel = None
    if args.task or args.checks_only:  # the cells the checks need, run here: no kernel to start
        try:
            learner = run_here(nb, asked, cell_timeout_s=args.timeout)
        except Stopped as exc:  # Ctrl-C or a kill: the cells ran here, no kernel to shut down
            print(f"{exc}: no later cell ran", file=sys.stderr)
            return 128 + exc.signum
        reports, errors, seconds = learner.reports, learner.errors, learner.seconds
    else:  # the whole notebook, profiling cells included, in a kernel: the same check cells report the same way
        print(f"running {notebook} ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="synclab-check-") as tmp:
            log = str(Path(tmp) / "reports.jsonl")
            kernel = run_notebook(notebook, {REPORT_LOG_ENV: log}, cell_timeout_s=args.timeout,
                                  notebook_timeout_s=args.notebook_timeout)
            reports = read_reports(log)
        errors, seconds = kernel.errors, kernel.seconds
    verdicts = verdicts_of(asked, reports, errors, check_cells(nb, chapter), notebook)
    summary = json_report(notebook, verdicts, errors, args.task, seconds)
    ok = summary["passed"] and not (kernel and (kernel.timed_out or kernel.not_run))
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0 if ok else 1
    for verdict in verdicts.values():
        print(verdict)
    _say_cells(summary, errors)
    if kernel is None:  # after the reports, in their stream: piped, the lines keep their order
        _say_printed(learner.printed)
        served = (f" (run by the warm check server: it ends after {check_server.IDLE_S / 60:.0f} idle minutes, or "
                  "now with `python -m synclab stop-checks`)") if check_server.SERVED else ""
        # a terminal's wall time also holds Python's start, which these seconds leave out
        rest = seconds - learner.checks_seconds  # the lab's setup cells and the reader's own
        took = (f"{seconds:.1f} s after Python started" + (f": {learner.checks_seconds:.1f} s in the check cells, "
                f"{rest:.1f} s in the lab's setup cells and yours" if rest >= 0.05 else ", all in the check cells")
                if seconds >= 0.05 else "under 0.1 s after Python started")
        print(f"({took}){served}")
    else:
        print(f"({kernel.seconds:.1f} s in the kernel)", file=sys.stderr)
        from synclab.lab.profile_html import write_profile_html

        page = notebook.with_suffix(".profile.html")
        drawn = write_profile_html(kernel.notebook, page, f"Your profile: {notebook.name}")
        print(f"your profile, {drawn} figure(s): {page.resolve()} (open it in a browser; it works offline)")
    print(verdict_line(summary, ok))
    return 0 if ok else 1


def verdicts_of(tasks: list[str], reports: dict[str, Any], errors: list[str], check_at: dict[str, int],
                notebook: Path | None = None) -> dict:
    """One verdict per task: its check cell's report, or why its check cell gave none: the exercise's own answer
    cell's error where that cell raised (a SyntaxError there leaves the check a NameError, which names no fault),
    else the check cell's."""
    from synclab.lab.verdicts import Verdict

    verdicts = {}
    answers_raised = {r["cell"]: r for r in cells_raised(notebook, errors)} if notebook is not None else {}
    exercise_of = _exercise_of_cells(notebook) if answers_raised else []
    for task in tasks:
        if task in reports:
            verdicts[task] = Verdict(task, reports[task])
            continue
        prefix = f"cell {check_at[task]}: " if task in check_at else None
        raised = next((e[len(prefix):] for e in errors if prefix and e.startswith(prefix)), "")
        at = check_at.get(task, 0)
        after = max((c for c in check_at.values() if c < at), default=-1)  # the check cell before this one
        answer = next((r for cell, r in answers_raised.items() if after < cell < at and exercise_of[cell][1]), None)
        if answer is not None:
            verdicts[task] = Verdict(task, error=f"its answer (cell {answer['cell']}) raised {answer['error']}")
            continue
        verdicts[task] = Verdict(task, error=f"its check cell raised {raised}" if raised
                                 else "its check cell did not run")
    return verdicts


def _say_cells(summary: dict[str, Any], errors: list[str]) -> None:
    """The cells that did not finish, beside the reports: a stub reached, code that broke after passing."""
    stubbed = [e for e in errors if "NotImplementedError" in e]
    if stubbed:
        print(f"{len(stubbed)} cell(s) stopped at an unfinished exercise: " + "; ".join(stubbed[:3]))
    crashed = summary["cells_raised"]
    for cell in crashed:
        print(f"cell {cell['cell']} ({cell['exercise']}) raised {cell['error']}: the run does not pass")
    other = [e for e in errors if "NotImplementedError" not in e
             and not any(e.startswith(f"cell {c['cell']}: ") for c in crashed)]
    if other:
        print("cells that did not finish: " + "; ".join(other[:5]))


PRINTED_LINES = 12  # of each cell's printout: a check calls an answer many times


def _say_printed(printed: list[tuple[str, str]]) -> None:
    """What the reader's code printed, the first lines of each cell's: a print is how many debug an answer."""
    for where, text in printed:
        lines = text.rstrip("\n").splitlines()
        more = f"\n  ... and {len(lines) - PRINTED_LINES} more line(s)" if len(lines) > PRINTED_LINES else ""
        print(f"your code printed {where}:\n" + "\n".join(f"  {line}" for line in lines[:PRINTED_LINES]) + more)


def cmd_grade(args: argparse.Namespace) -> int:
    """The grader's path (:mod:`.judge`): each exercise judged from the saved notebook in a process of its own."""
    import shlex
    import time

    import nbformat

    from synclab.lab.exercises import of_chapter
    from synclab.lab.judge import judge_notebook
    from synclab.lab.notebook_cells import chapter_of

    read = _read_lab(args.notebook)
    if read is None:
        return 2
    notebook, nb = read
    trusted = pristine_lab(notebook, nb)
    chapter = chapter_of(trusted if trusted is not None else nb)
    if chapter is None:
        print(f"{notebook} calls no exercise's checks", file=sys.stderr)
        return 2
    tasks = [e.task for e in of_chapter(chapter)]
    if args.task and args.task not in tasks:
        print(f"no exercise {args.task} in this lab; its exercises: {', '.join(tasks)}", file=sys.stderr)
        return 2
    reference = None
    if args.verify:  # the solutions beside the package: a students' install has none to verify with
        source = ROOT / solution_of(notebook, nb)
        if not source.exists():
            print(f"--verify needs the solutions ({source} is not here): a grader's checkout has them",
                  file=sys.stderr)
            return 2
        reference = nbformat.read(source, as_version=4)
    print(f"grading {notebook} from the saved notebook, each exercise in a fresh process ...", file=sys.stderr,
          flush=True)
    started = time.perf_counter()
    verdicts = judge_notebook(nb, [args.task] if args.task else None, trusted, sandbox=shlex.split(args.sandbox),
                              reference=reference)
    summary = {**json_report(notebook, verdicts, [], args.task, time.perf_counter() - started),
               "counts": COUNTS_ARE_ITS_WORD}
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        for verdict in verdicts.values():
            print(verdict)
            print("".join(f"  for the instructor to read: {line}\n" for line in verdict.review), end="")
        print(f"(for the instructor: {COUNTS_ARE_ITS_WORD})")
        print(verdict_line(summary, summary["passed"]))
    return 0 if summary["passed"] else 1


def _exercise_of_cells(notebook: Path) -> list[tuple[str, bool]]:
    """For each cell of ``notebook``, the last exercise whose code it follows ("" before the first), and whether the
    cell is that exercise's own.

    An exercise's cell is known by its stub or markers, or (in a lab the reader finished, where neither is
    left) by the names the exercise defines (:mod:`synclab.lab.exercises`), read from its lines: a cell that does
    not parse is still the exercise's.
    """
    import nbformat

    from synclab.lab.exercises import of_chapter
    from synclab.lab.notebook_cells import chapter_of, defines_any, tasks_of

    lab = nbformat.read(notebook, as_version=4)
    exercises = of_chapter(chapter_of(lab) or "")
    last, out = "", []
    for cell in lab.cells:
        found = []
        if cell.cell_type == "code":
            found = sorted(tasks_of(cell)) + [e.task for e in exercises if defines_any(cell.source, set(e.defines))]
            last = found[-1] if found else last
        out.append((last, bool(found)))
    return out


def cells_raised(notebook: Path, errors: list[str]) -> list[dict[str, Any]]:
    """The cells that raised (a stub's NotImplementedError aside), each with the exercise whose code it follows."""
    import re

    raised = []
    exercise_of: list[tuple[str, bool]] | None = None
    for error in errors:
        found = re.match(r"cell (\d+): (?!timed out)(.*)", error)
        if not found or "NotImplementedError" in found[2]:
            continue
        exercise_of = exercise_of or _exercise_of_cells(notebook)
        task, own = exercise_of[int(found[1])] if int(found[1]) < len(exercise_of) else ("", False)
        raised.append({"cell": int(found[1]), "exercise": f"Exercise {task}'s answer" if own else
                       f"after Exercise {task}" if task else "before the first exercise", "error": found[2]})
    return raised


def verdict_line(summary: dict[str, Any], ok: bool) -> str:
    """The run's last line: a stretch left undone reads as such, not as a failure."""
    undone = [e for e in summary["exercises"] if e["stretch"] and e["status"] != "passed"]
    if ok and undone:  # a stretch begun and partly right is not "not done" (a learner's 6.3 earned 3.33 of 4)
        return "core: all passed; " + ", ".join(
            f"stretch {e['task']}: " + (f"{e['earned']:g} of {e['points']:g} points" if e["earned"] else "not done")
            for e in undone)
    return "ALL CHECKS PASSED" if ok else "SOME CHECKS DID NOT PASS"


# What a grade's counts rest on, said in the grader's report (and on the instructors' page).
COUNTS_ARE_ITS_WORD = ("results were compared by the grader; the counts (syncs, torch calls, host work, time ratios) "
                       "were counted in the answer's own process and are its word, not verified (the instructors' "
                       "page, 'What the grades are good for')")


def json_report(notebook: Path, verdicts: dict, errors: list[str], task: str | None, seconds: float,
                points: dict[str, int] | None = None) -> dict[str, Any]:
    """``check --json`` and ``grade --json``: the verdicts, per exercise and per check, with points.

    An exercise is worth its points (:mod:`synclab.lab.exercises`); each check earns its share of them, and
    nothing else changes a score (the grader's review lines are for an instructor to read). A stretch exercise is
    counted apart (``stretch_points``, ``stretch_earned``):
    the lab passes on its core exercises, and ``total_earned`` adds the stretch as extra credit, as
    nbgrader's gradebook does.
    """
    from synclab.lab.exercises import EXERCISES, points_of

    exercises, checks = [], []
    for t, verdict in verdicts.items():
        worth, stretch = points_of(t, points), EXERCISES[t].stretch
        exercises.append({"task": t, "stretch": stretch, "points": worth, "earned": verdict.earned(worth),
                          "status": verdict.status(), "error": verdict.error,
                          "notes": verdict.notes, "review": verdict.review})
        report = verdict.report
        if report is None:
            checks.append({"task": t, "id": "", "name": "(the exercise's checks)", "status": "not run", "passed": False,
                           "points": worth, "earned": 0, "message": verdict.error, "stretch": stretch})
            continue
        for o in report.outcomes:
            share = worth * o.points / report.points
            checks.append({"task": t, "id": o.check_id, "name": o.name, "status": o.status, "passed": o.ok,
                           "points": round(share, 2), "earned": round(share * o.earned / o.points, 2),
                           "message": o.message,
                           "stretch": stretch})
    raised = cells_raised(notebook, errors)
    core = [e for e in exercises if not e["stretch"]]
    extra = [e for e in exercises if e["stretch"]]  # under stretch_points always, a stretch checked alone too
    earned = round(sum(e["earned"] for e in core), 2)
    stretch_earned = round(sum(e["earned"] for e in extra), 2)
    judged = core or extra  # what passing means: the core, or the stretch a run checked alone (--task 1.2)
    return {"notebook": str(notebook), "task": task,
            "passed": bool(judged) and all(e["status"] == "passed" for e in judged) and not raised,
            "points": sum(e["points"] for e in core), "earned": earned,
            "stretch_points": sum(e["points"] for e in extra), "stretch_earned": stretch_earned,
            "total_earned": round(earned + stretch_earned, 2),
            "seconds": round(seconds, 1), "exercises": exercises,
            "checks": checks, "cells_not_finished": list(errors),
            "cells_raised": raised}


def cmd_labs(args: argparse.Namespace) -> int:
    from synclab.lab import labgen

    if args.nbgrader:
        try:
            points = {t: int(n) for t, n in (p.split("=") for p in args.points)}
        except ValueError:
            print("--points takes TASK=POINTS, e.g. --points 1.2=8", file=sys.stderr)
            return 2
        return nbgrader_course(Path(args.nbgrader), args.chapters, points, args.book_url, args.exchange)
    if args.chapters:
        print("chapters can be chosen with --nbgrader only; `labs` regenerates every lab", file=sys.stderr)
        return 2
    argv = (["--check"] if args.check else []) + (["--force"] if args.force else [])
    return labgen.main(argv, root=ROOT)


def nbgrader_course(course: Path, chapters: list[str], points: dict[str, int] | None = None,
                    book_url: str = "", exchange: str = "") -> int:
    """Write nbgrader's ``source/<chapter>/`` notebooks (and the configs) into ``course``."""
    from synclab.lab.exercises import lab_version
    from synclab.lab.labgen import LabgenError
    from synclab.lab.nbgrader_source import EXCHANGE, points_by_chapter, write_course

    chosen = chosen_chapters(chapters)
    if chosen is None:
        return 2
    try:
        written = write_course(ROOT, course, chosen, points, book_url, exchange or EXCHANGE)
        points = points_by_chapter(chosen, points)
    except LabgenError as exc:
        print(exc, file=sys.stderr)
        return 1
    for path, (chapter, tasks) in zip(written, points.items()):
        detail = ", ".join(f"{task}: {n}" for task, n in tasks.items())
        print(f"{path}: {sum(tasks.values())} points ({detail})")
    print(f"lab version {lab_version()}: install this version on the students' image and on the grader")
    print(f"students' nbgrader config: {course / 'students_nbgrader_config.py'} (copy it to /etc/jupyter/"
          "nbgrader_config.py in their image)")
    print(f"next: cd {course} && nbgrader generate_assignment <chapter> (see the book's page for instructors)")
    return 0


def cmd_autograde(args: argparse.Namespace) -> int:
    """``nbgrader autograde`` of one assignment, ``--jobs`` students at a time, with a line per student."""
    import os
    import time

    from synclab.lab.nbgrader_run import StudentRun, autograde_students, submitted_students

    course = Path(args.course).resolve()
    if not (course / "nbgrader_config.py").exists():
        print(f"{course} is not an nbgrader course folder (no nbgrader_config.py): run this in the course folder "
              "or give --course", file=sys.stderr)
        return 2
    submitted = submitted_students(course, args.assignment)
    unknown = sorted(set(args.student) - set(submitted))
    if unknown:
        print(f"no submission of {args.assignment} from {', '.join(unknown)} in {course / 'submitted'}",
              file=sys.stderr)
        return 2
    students = args.student or submitted
    if not students:
        print(f"no submissions of {args.assignment} in {course / 'submitted'} (run nbgrader collect first)",
              file=sys.stderr)
        return 2
    jobs = args.jobs or os.cpu_count() or 1
    print(f"autograding {len(students)} submission(s) of {args.assignment}, {jobs} at a time ...", file=sys.stderr,
          flush=True)
    done: list[StudentRun] = []

    def said(run: StudentRun) -> None:
        done.append(run)
        log = run.log.read_text()
        reason = [line.strip() for line in log.splitlines() if "Error: " in line][-1:]
        outcome = ("FAILED: " + (reason[0] if reason else "no error line") + f" (log: {run.log})" if not run.ok
                   else "already autograded, skipped (--force grades it again)" if "Skipping existing" in log
                   else "done")
        print(f"[{len(done)}/{len(students)}] {run.student}: {outcome} ({run.seconds:.1f} s)", file=sys.stderr,
              flush=True)

    started = time.perf_counter()
    runs = autograde_students(course, args.assignment, students, jobs, args.force, on_done=said)
    seconds = time.perf_counter() - started
    failed = [run.student for run in runs if not run.ok]
    print(f"autograded {len(runs) - len(failed)} of {len(runs)} in {seconds:.0f} s ({seconds / len(runs):.1f} s per "
          f"submission with {jobs} jobs); logs in {course / 'autograde-logs' / args.assignment}")
    if failed:
        print(f"failed: {', '.join(failed)}: read their logs, then run again with --student", file=sys.stderr)
    return 1 if failed else 0


def cmd_autograde_times(args: argparse.Namespace) -> int:
    """Autograde each chapter's solution with the real nbgrader, in a scratch course; store the times."""
    from synclab.lab.nbgrader_run import record_autograde_times, time_autograde

    chosen = chosen_chapters(args.chapters)
    if chosen is None:
        return 2
    with tempfile.TemporaryDirectory() as course:
        data = time_autograde(ROOT, Path(course), chosen)
    path = record_autograde_times(data)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


def cmd_expected(args: argparse.Namespace) -> int:
    """Write data/expected/: the answers of the public cases of the exercises, from the solutions."""
    from synclab.lab.exercises import EXERCISES
    from synclab.lab.expected_results import write_expected

    unknown = [t for t in args.tasks if t not in EXERCISES]
    if unknown:
        print(f"no exercise {', '.join(unknown)} (the exercises: {', '.join(EXERCISES)})", file=sys.stderr)
        return 2
    for path in write_expected(tasks=args.tasks or None):
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


def cmd_new_chapter(args: argparse.Namespace) -> int:
    """A new chapter's skeleton from templates/, registered, its solution stored and its lab written."""
    from synclab.lab.new_chapter import new_chapter

    return new_chapter(args.slug, args.title or args.slug.replace("_", " ").capitalize())


def cmd_student_image(args: argparse.Namespace) -> int:
    """Write the students' install (no solution notebooks) into a new folder."""
    from synclab.lab.student_image import StudentImageError, write_student_image

    dest = Path(args.dest).resolve()
    try:
        write_student_image(ROOT, dest)
    except StudentImageError as exc:
        print(exc, file=sys.stderr)
        return 2
    from synclab.lab.exercises import lab_version

    print(f"wrote {dest}: synclab/, data/, labs/ (generated), requirements.txt, pyproject.toml; no solutions/")
    print(f"lab version {lab_version()}: the grader must run the same")
    print(f"install it in the students' image: python -m pip install -r {dest}/requirements.txt && "
          f"python -m pip install --no-deps -e {dest}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.chapter not in CHAPTERS:
        print(f"unknown chapter {args.chapter!r}; choose from {', '.join(CHAPTERS)}", file=sys.stderr)
        return 2
    notebook = ROOT / "solutions" / f"{CHAPTERS[args.chapter]}.ipynb"
    return bench_notebook(args.chapter, notebook, args.timeout)


def bench_notebook(chapter: str, notebook: Path, timeout: int, out_root: Path | None = None) -> int:
    """Run ``notebook`` as ``bench`` does and store what its cells recorded; 0 only if every cell ran.

    A failing cell does not stop the others, and what every cell recorded is kept (a GPU's half
    hour is too short to lose it), with the failures listed under ``"errors"``; the exit status
    says it failed.
    """
    from synclab.device import has_cuda
    from synclab.lab.notebook_runner import Stopped, run_notebook
    from synclab.provenance import Provenance
    from synclab.reference import BENCH_DIR_ENV, REFERENCE_DIR
    from synclab.run_modes import DELIBERATE_ENV

    prov = Provenance.here()
    if out_root is None:  # a CPU run is useful to look at, never a reference
        out_root = REFERENCE_DIR if has_cuda() else ROOT / "_build" / "bench"
    out = out_root / prov.slug / f"{chapter}.json"
    log = BenchLog()
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / f"{chapter}.json"
        try:
            errors = run_notebook(notebook, {BENCH_DIR_ENV: tmp, DELIBERATE_ENV: "1"}, cell_timeout_s=timeout,
                                  on_cell=log).errors
        except Stopped as exc:  # a kill at the step's limit: what the cells before recorded is kept
            if result.exists():
                _store_bench(result, out, prov, [f"{exc} in cell {log.current}: the cells after it did not run"])
            raise
        if not result.exists():
            print(f"{notebook} recorded no results" + (": " + "; ".join(errors) if errors else ""), file=sys.stderr)
            return 1
        _store_bench(result, out, prov, errors)
    if not has_cuda():
        print("no GPU here: this is a CPU run, kept out of data/reference/")
    if errors:
        print(f"{len(errors)} cell(s) failed; the results above are kept: " + "; ".join(errors),
              file=sys.stderr)
        return 1
    return 0


class BenchLog:
    """The bench's log, as it runs (``run_notebook``'s ``on_cell``): a cell as it starts, then its time and the end
    of what it printed or displayed (a check's report; "... left out: 2.1 ..." says why a figure lacks a variant),
    flushed, so that a run killed at its limit says where it was."""

    OUTPUT_LINES = 12  # of each cell's printed text

    def __init__(self) -> None:
        self.current: int | None = None  # the cell running, or the last one that ran

    def __call__(self, index: int, cell: Any, seconds: float | None) -> None:
        self.current = index
        if seconds is None:
            print(f"[cell {index}] {cell.source.splitlines()[0][:100] if cell.source else ''}", flush=True)
            return
        text = "".join(self._text(out) for out in cell.get("outputs", []))
        for line in text.splitlines()[-self.OUTPUT_LINES:]:
            print(f"    {line[:200]}")
        print(f"[cell {index}] {seconds:.1f} s", flush=True)

    @staticmethod
    def _text(out: Any) -> str:
        """An output as text: what was printed, what was displayed (a check's report), an error's name and message."""
        if out.get("output_type") == "stream":
            return out.get("text", "")
        if out.get("output_type") == "error":
            return f"{out.get('ename')}: {out.get('evalue')}\n"
        plain = out.get("data", {}).get("text/plain", "")
        return plain if plain.endswith("\n") or not plain else plain + "\n"


def _store_bench(result: Path, out: Path, prov: Any, errors: list[str]) -> None:
    """Write what a bench's cells recorded (``result``) to ``out``, with the cells' failures under ``"errors"``."""
    data = json.loads(result.read_text())
    if errors:
        data["errors"] = errors
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))
    where = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f"wrote {where} ({prov.label}): {', '.join(data['results'])}", flush=True)


def cmd_measure(args: argparse.Namespace) -> int:
    """The deliberate run behind the book's CPU figures: each solution notebook re-executed, claims enforced.

    A notebook is written back (its outputs are what the book shows) only when every cell ran,
    i.e. every timing figure satisfied its claim (synclab.claims); otherwise it stays as it was.
    """
    import nbformat

    from synclab.lab.notebook_runner import run_notebook
    from synclab.run_modes import DELIBERATE_ENV

    chosen = chosen_chapters(args.chapters)
    if chosen is None:
        return 2
    chapters = list(chosen)
    failed = []
    for chapter in chapters:
        notebook = ROOT / "solutions" / f"{CHAPTERS[chapter]}.ipynb"
        print(f"measuring {chapter} ({notebook.relative_to(ROOT)}) ...", file=sys.stderr, flush=True)
        run = run_notebook(notebook, {DELIBERATE_ENV: "1"}, cell_timeout_s=args.timeout)
        nb, errors = run.notebook, run.errors
        if errors:
            failed.append(chapter)
            print(f"{chapter}: nothing stored; " + "; ".join(errors), file=sys.stderr)
            continue
        for cell in nb.cells:
            cell.metadata.pop("execution", None)  # no timestamps: a stored notebook changes only with its results
        nbformat.write(nb, notebook)
        print(f"{chapter}: stored {notebook.relative_to(ROOT)}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synclab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="run a lab notebook and report its checks")
    p.add_argument("notebook")
    p.add_argument("--task", help="check one exercise (e.g. 4.1): run only the cells it needs")
    p.add_argument("--timeout", type=float, default=120, help="seconds per cell (then it is interrupted)")
    p.add_argument("--notebook-timeout", type=float, default=600, help="seconds for the whole notebook")
    p.add_argument("--checks-only", action="store_true",
                   help="run only the cells the exercises and their checks need (leave the profiling cells out)")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout (points per check)")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("grade", help="grade a notebook as the grader does: each exercise in a process of its own")
    p.add_argument("notebook")
    p.add_argument("--task", help="grade one exercise (e.g. 4.1)")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON on stdout (points per check)")
    p.add_argument("--verify", action="store_true",
                   help="count a passed check only where it saw the results the solutions give on the same cases "
                        "(a grader's checkout: the solutions are judged once, on the same seed)")
    p.add_argument("--sandbox", default="", metavar="COMMAND",
                   help="run the grader's worker under COMMAND, e.g. 'setpriv --reuid=synclab-judge "
                        "--regid=synclab-judge --clear-groups --' (a user who can read no course file)")
    p.set_defaults(fn=cmd_grade)
    p = sub.add_parser("labs", help="regenerate labs/ from solutions/")
    p.add_argument("--check", action="store_true", help="only verify the labs are fresh")
    p.add_argument("--force", action="store_true", help="overwrite edited labs (a backup is kept)")
    p.add_argument("--nbgrader", metavar="COURSE", help="write nbgrader source assignments into COURSE instead")
    p.add_argument("chapters", nargs="*", help="with --nbgrader: the chapters (default: all)")
    p.add_argument("--points", action="append", default=[], metavar="TASK=N",
                   help="with --nbgrader: an exercise's points, over the lab's (repeatable: --points 1.2=8)")
    p.add_argument("--book-url", default="", help="with --nbgrader: where students read the book (links to it)")
    p.add_argument("--exchange", default="", help="with --nbgrader: nbgrader's exchange folder, written into both "
                   "configs (default: /srv/nbgrader/exchange)")
    p.set_defaults(fn=cmd_labs)
    p = sub.add_parser("bench", help="run a chapter's benchmarks on this device and save the results")
    p.add_argument("chapter", help=", ".join(CHAPTERS))
    p.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    p.set_defaults(fn=cmd_bench)
    p = sub.add_parser("measure", help="re-execute solution notebooks as a deliberate run and store their outputs")
    p.add_argument("chapters", nargs="*", help=f"chapters to measure (default: all of {', '.join(CHAPTERS)})")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    p.set_defaults(fn=cmd_measure)
    p = sub.add_parser("autograde", help="nbgrader autograde one assignment, several students at a time")
    p.add_argument("assignment", help="the assignment, e.g. ch3")
    p.add_argument("--course", default=".", help="the nbgrader course folder (default: here)")
    p.add_argument("--jobs", type=int, default=0, help="submissions at a time (default: one per CPU core)")
    p.add_argument("--student", action="append", default=[], help="only this student (repeatable)")
    p.add_argument("--force", action="store_true", help="autograde again what was autograded already")
    p.set_defaults(fn=cmd_autograde)
    p = sub.add_parser("autograde-times", help="time nbgrader autograding each chapter's solution (data/grading/)")
    p.add_argument("chapters", nargs="*", help=f"chapters (default: all of {', '.join(CHAPTERS)})")
    p.set_defaults(fn=cmd_autograde_times)
    p = sub.add_parser("student-image", help="write the students' install (package, data, labs; no solutions)")
    p.add_argument("dest", help="a new or empty folder")
    p.set_defaults(fn=cmd_student_image)
    p = sub.add_parser("expected", help="store the answers of the public cases of the exercises judged apart "
                                        "(data/expected/)")
    p.add_argument("tasks", nargs="*", help="exercises (default: every one judged apart)")
    p.set_defaults(fn=cmd_expected)
    p = sub.add_parser("new-chapter", help="write a new chapter's skeleton from templates/ and register it")
    p.add_argument("slug", help="the chapter's package name, in lower case: synclab/<slug>/")
    p.add_argument("--title", default="", help="the chapter's title (default: the slug in words)")
    p.set_defaults(fn=cmd_new_chapter)
    p = sub.add_parser("stop-checks", help="end the warm check server now (it ends by itself after 15 idle minutes)")
    p.add_argument("--all", action="store_true", help="every check server of yours, whatever checkout started it")
    p.set_defaults(fn=cmd_stop_checks)
    p = sub.add_parser("serve-checks", help=argparse.SUPPRESS)  # the warm check server (synclab.lab.check_server)
    p.add_argument("socket")
    p.set_defaults(fn=cmd_serve_checks)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as given: a warm server runs the same command
    from synclab.lab.notebook_runner import Stopped, stop_on_signals

    try:
        with stop_on_signals():
            return args.fn(args)
    except Stopped as exc:  # the kernel is already shut down
        print(f"{exc}: the kernel was shut down", file=sys.stderr)
        return 128 + exc.signum


if __name__ == "__main__":
    sys.exit(main())
