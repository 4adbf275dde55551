"""``python -m synclab``: check a lab from the terminal, regenerate labs, record benchmarks.

    python -m synclab check labs/00_primer.ipynb   # run a notebook, report its checks (exit 0: all pass)
    python -m synclab check labs/04_....ipynb --task 4.1   # one exercise: only the cells it needs
    python -m synclab check labs/00_primer.ipynb --json   # the report as JSON, with points (for graders)
    python -m synclab check labs/03_....ipynb --checks-only   # every exercise, without the profiling cells
    python -m synclab labs [--check] [--force]      # regenerate labs from solutions / verify they are fresh
    python -m synclab labs --nbgrader COURSE [ch0 ...]   # nbgrader source assignments for a class
    python -m synclab bench ch0                     # run a chapter's profiling on this device, save results
    python -m synclab measure [ch0 ...]             # the deliberate CPU run: re-execute solutions, store outputs
    python -m synclab autograde-times [ch0 ...]     # time nbgrader autograding each chapter's solution
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


def cmd_check(args: argparse.Namespace) -> int:
    import nbformat

    from synclab.lab import labgen
    from synclab.checks import REPORT_LOG_ENV, CheckReport, Outcome
    from synclab.lab.notebook_runner import run_notebook

    notebook = Path(args.notebook)
    if not notebook.exists():
        print(f"no such notebook: {notebook}", file=sys.stderr)
        return 2
    cells = None
    if args.task or args.checks_only:
        lab = nbformat.read(notebook, as_version=4)
        source = solution_of(notebook, lab)
        try:
            solution = nbformat.read(ROOT / source, as_version=4)
            cells = (labgen.cells_for_task(lab, solution, args.task) if args.task
                     else labgen.cells_for_checks(lab, solution))
        except (labgen.LabgenError, FileNotFoundError) as exc:
            print(f"cannot check {f'exercise {args.task} alone' if args.task else 'without the profiling cells'}: {exc}",
                  file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "checks.jsonl"
        what = (f"exercise {args.task} of {notebook}" if args.task
                else f"the exercises of {notebook} (profiling cells left out)" if args.checks_only else str(notebook))
        print(f"running {what} ...", file=sys.stderr, flush=True)
        run = run_notebook(notebook, {REPORT_LOG_ENV: str(log)}, cell_timeout_s=args.timeout,
                           notebook_timeout_s=args.notebook_timeout, cells=cells)
        lines = log.read_text().splitlines() if log.exists() else []
    reports = []
    for line in lines:
        data = json.loads(line)
        reports.append(CheckReport(data["title"], [Outcome(**o) for o in data["outcomes"]], data["seed"],
                                   data.get("check_function", "")))
    summary = json_report(notebook, reports, run, args.task)
    crashed = summary["cells_raised"]
    ok = summary["passed"] and not run.timed_out and not run.not_run and not crashed
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0 if ok else 1
    for report in reports:
        print(report)
    for check in summary["checks"]:
        if check["status"] == "not run":  # its check cell never reported: the exercise scores 0
            print(f"Exercise {check['task']}: not checked, {check['message']}")
    stubbed = [e for e in run.errors if "NotImplementedError" in e]
    if stubbed:
        print(f"{len(stubbed)} cell(s) stopped at an unfinished exercise: " + "; ".join(stubbed[:3]))
    for cell in crashed:  # the reader's code broke in a cell after its checks: the run does not pass
        print(f"cell {cell['cell']} ({cell['exercise']}) raised {cell['error']}: code that passed its checks "
              f"broke here, so the run does not pass")
    other = [e for e in run.errors if "NotImplementedError" not in e
             and not any(e.startswith(f"cell {c['cell']}: ") for c in crashed)]
    if other:
        print("cells that did not finish: " + "; ".join(other[:5]))
    print(f"({run.seconds:.1f} s)", file=sys.stderr)
    if not (args.task or args.checks_only):  # the profiling cells ran: their figures, for a reader in a terminal
        from synclab.lab.profile_html import write_profile_html

        page = notebook.with_suffix(".profile.html")
        drawn = write_profile_html(run.notebook, page, f"Your profile: {notebook.name}")
        print(f"your profile, {drawn} figure(s): {page.resolve()} (open it in a browser; it works offline)")
    if not reports:
        print("no checks ran in this notebook")
        return 1
    print(verdict(summary, ok))
    return 0 if ok else 1


def _expected_points(notebook: Path) -> dict[str, int]:
    """Each exercise's points, from the solution the notebook was generated from ({} if unknown)."""
    import nbformat

    from synclab.lab.labgen import LabgenError
    from synclab.lab.nbgrader_source import exercise_points

    try:
        nb = nbformat.read(notebook, as_version=4)
        source = solution_of(notebook, nb)
        return exercise_points(nbformat.read(ROOT / source, as_version=4), source)
    except (LabgenError, OSError, ValueError):
        return {}


def _exercise_of_cells(notebook: Path) -> list[str]:
    """For each cell of ``notebook``, the last exercise whose code it follows ("" before the first).

    An exercise's cell is known by its markers or stub, or (in a lab the reader finished, where
    neither is left) by the names its solution's cell defines.
    """
    import ast
    import re

    import nbformat

    lab = nbformat.read(notebook, as_version=4)
    by_name: dict[str, str] = {}
    source = solution_of(notebook, lab)
    if (ROOT / source).exists():
        for cell in nbformat.read(ROOT / source, as_version=4).cells:
            tasks = re.findall(r"### BEGIN SOLUTION (\d+\.\d+)", cell.source) if cell.cell_type == "code" else []
            if tasks:
                for node in ast.parse(cell.source).body:
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                        by_name[node.name] = tasks[-1]
    last, out = "", []
    for cell in lab.cells:
        if cell.cell_type == "code":
            found = re.findall(r'(?:### BEGIN SOLUTION |NotImplementedError\("Exercise )(\d+\.\d+)', cell.source)
            try:
                found += [by_name[n.name] for n in ast.parse(cell.source).body
                          if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in by_name]
            except SyntaxError:
                pass
            last = found[-1] if found else last
        out.append(last)
    return out


def cells_raised(notebook: Path, run: Any) -> list[dict[str, Any]]:
    """The cells that raised (a stub's NotImplementedError aside), each with the exercise whose code it follows."""
    import re

    raised = []
    exercise_of: list[str] | None = None
    for error in run.errors:
        found = re.match(r"cell (\d+): (?!timed out)(.*)", error)
        if not found or "NotImplementedError" in found[2]:
            continue
        exercise_of = exercise_of or _exercise_of_cells(notebook)
        task = exercise_of[int(found[1])] if int(found[1]) < len(exercise_of) else ""
        raised.append({"cell": int(found[1]), "exercise": f"after Exercise {task}" if task else
                       "before the first exercise", "error": found[2]})
    return raised


def stretch_tasks(notebook: Path) -> set[str]:
    """The exercises its solution heads ``## Exercise N.M (stretch)``: not needed to pass the lab."""
    import re

    import nbformat

    try:
        nb = nbformat.read(notebook, as_version=4)
        source = solution_of(notebook, nb)
        if (ROOT / source).exists():
            nb = nbformat.read(ROOT / source, as_version=4)
    except (OSError, ValueError):
        return set()
    return {m[1] for c in nb.cells if c.cell_type == "markdown"
            for m in [re.match(r"## Exercise (\d+\.\d+) \(stretch\)", c.source)] if m}


def verdict(summary: dict[str, Any], ok: bool) -> str:
    """The run's last line: a stretch left undone reads as such, not as a failure."""
    undone = [t for t, passed in summary["stretch_passed"].items() if not passed]
    if ok and undone:
        return "core: all passed; " + ", ".join(f"stretch {t}: not done" for t in undone)
    return "ALL CHECKS PASSED" if ok else "SOME CHECKS DID NOT PASS"


def json_report(notebook: Path, reports: list, run: Any, task: str | None) -> dict[str, Any]:
    """``check --json``: one entry per check, with points; an exercise whose checks never ran scores 0.

    A stretch exercise's checks are listed with ``"stretch": true`` and counted apart (``stretch_points``,
    ``stretch_earned``): the lab passes on its core exercises.
    """
    stretch = stretch_tasks(notebook)
    checks = [{"task": o.task, "name": o.name, "status": o.status, "passed": o.ok, "points": o.points,
               "earned": o.earned, "message": o.message, "stretch": o.task in stretch}
              for r in reports for o in r.outcomes]
    ran = {c["task"] for c in checks}
    for missing, points in _expected_points(notebook).items():
        if missing not in ran and (task is None or missing == task):
            reason = "its check cell did not run" + (f" ({run.errors[0]})" if run.errors else "")
            checks.append({"task": missing, "name": "(the exercise's checks)", "status": "not run", "passed": False,
                           "points": points, "earned": 0, "message": reason, "stretch": missing in stretch})
    raised = cells_raised(notebook, run)
    core = [c for c in checks if not c["stretch"]] or checks  # a stretch checked alone (--task) is the run
    extra = [c for c in checks if c["stretch"] and c not in core]
    return {"notebook": str(notebook), "task": task,
            "passed": bool(core) and all(c["passed"] for c in core) and not raised,
            "points": sum(c["points"] for c in core), "earned": sum(c["earned"] for c in core),
            "stretch_points": sum(c["points"] for c in extra), "stretch_earned": sum(c["earned"] for c in extra),
            "stretch_passed": {t: all(c["passed"] for c in extra if c["task"] == t)
                               for t in dict.fromkeys(c["task"] for c in extra)},
            "seconds": round(run.seconds, 1), "checks": checks, "cells_not_finished": list(run.errors),
            "cells_raised": raised}


def cmd_labs(args: argparse.Namespace) -> int:
    from synclab.lab import labgen

    if args.nbgrader:
        return nbgrader_course(Path(args.nbgrader), args.chapters)
    if args.chapters:
        print("chapters can be chosen with --nbgrader only; `labs` regenerates every lab", file=sys.stderr)
        return 2
    argv = (["--check"] if args.check else []) + (["--force"] if args.force else [])
    return labgen.main(argv, root=ROOT)


def nbgrader_course(course: Path, chapters: list[str]) -> int:
    """Write nbgrader's ``source/<chapter>/`` notebooks (and a config) into ``course``."""
    from synclab.lab.labgen import LabgenError
    from synclab.lab.nbgrader_source import points_by_chapter, write_course

    chosen = chosen_chapters(chapters)
    if chosen is None:
        return 2
    try:
        written = write_course(ROOT, course, chosen)
        points = points_by_chapter(ROOT, chosen)
    except LabgenError as exc:
        print(exc, file=sys.stderr)
        return 1
    for path, (chapter, tasks) in zip(written, points.items()):
        detail = ", ".join(f"{task}: {n}" for task, n in tasks.items())
        print(f"{path}: {sum(tasks.values())} points ({detail})")
    print(f"next: cd {course} && nbgrader generate_assignment <chapter> (see the book's page for instructors)")
    return 0


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
    from synclab.lab.notebook_runner import run_notebook
    from synclab.provenance import Provenance
    from synclab.reference import BENCH_DIR_ENV, REFERENCE_DIR
    from synclab.timing import DELIBERATE_ENV

    prov = Provenance.here()
    if out_root is None:  # a CPU run is useful to look at, never a reference
        out_root = REFERENCE_DIR if has_cuda() else ROOT / "_build" / "bench"
    out = out_root / prov.slug / f"{chapter}.json"
    with tempfile.TemporaryDirectory() as tmp:
        errors = run_notebook(notebook, {BENCH_DIR_ENV: tmp, DELIBERATE_ENV: "1"}, cell_timeout_s=timeout).errors
        result = Path(tmp) / f"{chapter}.json"
        if not result.exists():
            print(f"{notebook} recorded no results" + (": " + "; ".join(errors) if errors else ""), file=sys.stderr)
            return 1
        data = json.loads(result.read_text())
    if errors:
        data["errors"] = errors
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))
    where = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f"wrote {where} ({prov.label}): {', '.join(data['results'])}")
    if not has_cuda():
        print("no GPU here: this is a CPU run, kept out of data/reference/")
    if errors:
        print(f"{len(errors)} cell(s) failed; the results above are kept: " + "; ".join(errors),
              file=sys.stderr)
        return 1
    return 0


def cmd_measure(args: argparse.Namespace) -> int:
    """The deliberate run behind the book's CPU figures: each solution notebook re-executed, claims enforced.

    A notebook is written back (its outputs are what the book shows) only when every cell ran,
    i.e. every timing figure satisfied its claim (synclab.claims); otherwise it stays as it was.
    """
    import nbformat

    from synclab.lab.notebook_runner import run_notebook
    from synclab.timing import DELIBERATE_ENV

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
    p = sub.add_parser("labs", help="regenerate labs/ from solutions/")
    p.add_argument("--check", action="store_true", help="only verify the labs are fresh")
    p.add_argument("--force", action="store_true", help="overwrite edited labs (a backup is kept)")
    p.add_argument("--nbgrader", metavar="COURSE", help="write nbgrader source assignments into COURSE instead")
    p.add_argument("chapters", nargs="*", help="with --nbgrader: the chapters (default: all)")
    p.set_defaults(fn=cmd_labs)
    p = sub.add_parser("bench", help="run a chapter's benchmarks on this device and save the results")
    p.add_argument("chapter", help=", ".join(CHAPTERS))
    p.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    p.set_defaults(fn=cmd_bench)
    p = sub.add_parser("measure", help="re-execute solution notebooks as a deliberate run and store their outputs")
    p.add_argument("chapters", nargs="*", help=f"chapters to measure (default: all of {', '.join(CHAPTERS)})")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    p.set_defaults(fn=cmd_measure)
    p = sub.add_parser("autograde-times", help="time nbgrader autograding each chapter's solution (data/grading/)")
    p.add_argument("chapters", nargs="*", help=f"chapters (default: all of {', '.join(CHAPTERS)})")
    p.set_defaults(fn=cmd_autograde_times)
    args = parser.parse_args(argv)
    from synclab.lab.notebook_runner import Stopped, stop_on_signals

    try:
        with stop_on_signals():
            return args.fn(args)
    except Stopped as exc:  # the kernel is already shut down
        print(f"{exc}: the kernel was shut down", file=sys.stderr)
        return 128 + exc.signum


if __name__ == "__main__":
    sys.exit(main())
