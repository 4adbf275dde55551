"""The grader: a notebook's exercises judged where the reader's other cells cannot reach the verdict.

Used by ``python -m synclab grade`` and by nbgrader's autograding (:mod:`synclab.lab.nbgrader_judge`); the
instructors' page explains it. A learner's check (``python -m synclab check``, a lab's check cells) runs the
checks in the learner's own process, which is right for learning and wrong for grading. The grader instead:

* takes each exercise's cells from the saved notebook (the reader's cells before its check cell that it needs,
  run whole), with the notebook's setup cells from a trusted copy (nbgrader's locked cells, or the lab as generated,
  where the grader has it);
* runs its checks in a fresh process forked for that exercise alone (:mod:`synclab.lab.judge_worker`), and the
  reader's cells in a process of their own, under the sandbox's audit hook (:mod:`synclab.lab.judged_apart`): only
  data crosses between them;
* with the right answers at hand (``reference``), counts a passed check only where it saw the results the right
  answers give on the same cases (:func:`verify`);
* hands back one :class:`~synclab.lab.verdicts.Verdict` per exercise. The score is the checks' alone: what the
  grader's reading of the cells and the answer's process's audit hook find are review lines for the instructor.
"""

from __future__ import annotations

import ast
import atexit
import fcntl
import hashlib
import json
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import nbformat
from nbformat import NotebookNode

import synclab
from synclab.lab import answer_server
from synclab.lab.answer_scan import package_names, suspicious
from synclab.lab.chapters import PACKAGES
from synclab.lab.exercises import EXERCISES, of_chapter
from synclab.lab.notebook_cells import (chapter_of, check_cells, code, defines_any, first_exercise_cell, needed,
                                        tasks_of, with_what_they_read)
from synclab.lab.verdicts import Verdict, from_worker
from synclab.lab.judged_apart import answer_environment
from synclab.lab.worker_server import server_for

JUDGE_TIME_LIMIT_S = 240.0  # one exercise: its checks' own limits (60 s, 120 s for chapter 3's ranks) and setup
# Names an answer has little reason to touch: a line naming one is a review line for the instructor (the checks
# still judge what the code does).
_TAMPERING = re.compile(r"synclab\.(checks|lab|answer_keys)|answer_keys|_run_one|__wrapped__|__closure__|__code__|"
                        r"__globals__|_getframe|settrace|setprofile|sys\.modules|gc\.get_|os\._exit|/proc/|"
                        r"SYNCLAB_(CHECK|DEVICE|GRADING|REFERENCE|BENCH|DELIBERATE|BOOK|COMMIT|SMOKE)|NBGRADER_|"
                        r"\bbuiltins\b")
# Worth a look too: an honest answer has little use for them, but may. A test of which kind of device the
# code runs on is one: the grader judges every answer on the simulated device, so a branch taken only on a real GPU
# (a sync kept there) is never judged. torch.cuda.is_available() is not one: inside the checks the simulated device
# answers it as a GPU machine does (True), so the branch it guards is the one judged (synclab.sim.cuda).
_REVIEW = re.compile(r"(?<![\w.])(eval|exec)\(|importlib|__import__|\.is_cuda\b|\.is_cpu\b|\.device\.type\b|"
                     r"\.get_device\(|torch\.cuda\.(device_count|get_device_name)\b|\bhas_cuda\(|"
                     r"\bis_simulated\(|\bdevice_is_pinned_to_simulation\(")


# ----------------------------------------------------------------------------- reading a notebook


def _setup_cells(nb: NotebookNode, trusted: NotebookNode | None, chapter: str) -> tuple[list[str], set[str]]:
    """The setup cells' code and ids: the trusted copy's where there is one, else the notebook's own."""
    source = trusted if trusted is not None else nb
    cells = [c for c in source.cells[:first_exercise_cell(source, chapter)] if c.cell_type == "code"]
    return [code(c) for c in cells], {c.get("id") for c in cells}


def _needed(setup: list[str], reads_from: list[str]) -> list[str]:
    """The setup cells the exercise needs: every import cell, and cells binding a name it (or a needed cell) reads."""
    return [source for source, kept in zip(setup, needed(setup, reads_from)) if kept]


def review_lines(sources: list[str], pattern: re.Pattern = _REVIEW) -> list[str]:
    """The reader's lines that match ``pattern`` in their code: comments and docstrings are prose, not code."""
    found = []
    for source in sources:
        for line in _code_only(source).splitlines():
            if pattern.search(line):
                found.append(line.strip()[:120])
    return list(dict.fromkeys(found))


def _code_only(source: str) -> str:
    """``source`` without its comments and docstrings (as Python reads it back); as it is if it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0] = ast.Pass()  # the docstring
    return ast.unparse(tree)


def jobs_for(nb: NotebookNode, tasks: list[str] | None = None,
             trusted: NotebookNode | None = None) -> tuple[str, list[dict], list[str], dict[str, list[str]]]:
    """(chapter, the worker's exercises, the setup cells, each exercise's review lines) for a notebook.

    An exercise runs the reader's cells before its check cell that it needs (every answer cell, and the cells
    they or the check read from), whole, as its kernel ran them; one that builds on another (1.2 on 1.1) gets the
    package's stand-in for it when that one failed.
    A dependency is honoured only when ``tasks`` asks for it too, or it was judged in the same run.
    """
    chapter = chapter_of(trusted if trusted is not None else nb) or chapter_of(nb)
    if chapter is None:
        raise ValueError("this notebook calls no exercise's checks")
    setup, setup_ids = _setup_cells(nb, trusted, chapter)
    first = first_exercise_cell(nb, chapter) if trusted is None else 0
    check_at = check_cells(nb, chapter)
    checks = set(check_at.values())
    names = {e.task: set(e.defines) for e in of_chapter(chapter)}
    reader = []  # the reader's cells: everything after the setup but the check cells; each with what it answers
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and index >= first and index not in checks and \
                (trusted is None or cell.get("id") not in setup_ids):
            source = code(cell)
            answers = tasks_of(cell) | {t for t, defined in names.items() if defines_any(source, defined)}
            reader.append((index, source, sorted(answers)))
    exercises, reads = [], []
    reviews: dict[str, list[str]] = {}
    names = package_names(setup + [source for _, source, _ in reader])  # what the cells call the package
    for exercise in of_chapter(chapter):
        if tasks is not None and exercise.task not in tasks:
            continue
        end = check_at.get(exercise.task, len(nb.cells))
        before = [(source, answers) for i, source, answers in reader if i < end]
        # every answer cell, and the reader's other cells the answers or the check read from (as the learner's
        # check runs them): a demo or a profile nobody reads is not the exercise's to run
        runs = with_what_they_read([s for s, _ in before], [bool(a) for _, a in before], [exercise.check])
        cells = [{"source": source, "answers": answers} for (source, answers), run in zip(before, runs) if run]
        exercises.append({"task": exercise.task, "defines": list(exercise.defines), "check": exercise.check,
                          "cells": cells, "builds_on": list(exercise.builds_on),
                          "stand_in": [list(pair) for pair in exercise.stand_in],
                          "keeps": list(exercise.answer_process_keeps)})
        review = review_lines([c["source"] for c in cells if exercise.task in c["answers"]])
        review += [f"names the grader's parts: {line}"
                   for line in review_lines([c["source"] for c in cells], _TAMPERING)]
        review += [f"cell {n}, {finding}" for n, c in enumerate(cells, start=1)
                   for finding in suspicious(c["source"], names)]
        reads += [c["source"] for c in cells] + [exercise.check]
        if trusted is None:  # the setup cells are the notebook's own: the reader's, as far as the grader knows
            review += [f"names the grader's parts: {line}" for line in review_lines(setup, _TAMPERING)
                       if not line.startswith(("from ", "import "))]
            review += [f"a setup cell, {finding}" for source in setup
                       for finding in suspicious(source, names) if ": imports " not in finding]
        reviews[exercise.task] = list(dict.fromkeys(review))
    return chapter, exercises, _needed(setup, reads), reviews


# ----------------------------------------------------------------------------- running the worker


def run_worker(chapter: str, exercises: list[dict], setup: list[str], setup_trusted: bool, time_limit_s: float,
               sandbox: list[str] | None = None, closed: list[str] | None = None,
               seed: int | None = None) -> tuple[list[str], str, str]:
    """Run the worker on ``exercises``: the lines it wrote to its channel, its stderr, and the token they carry.

    The worker starts a session of its own, so at the deadline (each exercise's limit, and a minute more)
    its whole process group is killed: nothing the reader's code started outlives the grading, under
    ``synclab autograde`` and plain nbgrader alike. ``closed`` are more folders no answer may read (nbgrader's
    course folder, whose ``source/`` holds the solutions), beside the repository the grader runs from.
    """
    token = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    job = {"imports": [PACKAGES[chapter]], "setup": setup, "setup_trusted": setup_trusted, "exercises": exercises,
           "token": token, "channel_fd": write_end, "time_limit_s": time_limit_s,
           "course_roots": [str(Path(synclab.__file__).resolve().parent.parent), *(closed or [])],
           "readable": _readable(), "grading_install": str(grading_install()),
           "answer_install": str(answer_install())}
    for exercise in exercises:  # chapter 6's: an install that keeps what its runners run (the book's fixes)
        if exercise.get("keeps"):
            exercise["answer_install"] = str(answer_install(tuple(exercise["keeps"])))
    deadline = time.monotonic() + time_limit_s * len(exercises) + 60
    chunks: list[bytes] = []
    with tempfile.TemporaryDirectory(prefix="synclab-judge-") as cwd:
        os.chmod(cwd, 0o755)  # empty; a sandboxed worker's user may enter it, not write to it
        env = _worker_env(seed)
        if sandbox:  # a fresh worker under the sandbox's command, as its user
            proc = subprocess.Popen([*sandbox, sys.executable, "-m", "synclab.lab.judge_worker"],
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    cwd=cwd, env=env, pass_fds=(write_end,), start_new_session=True)
            os.close(write_end)
            proc.stdin.write(json.dumps(job).encode())  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
            group, errors = proc.pid, proc.stderr
        else:  # forked by this process's warm worker (synclab.lab.worker_server), in a session of its own
            from synclab.lab.judge_worker import SEED_ENV  # each job's own: the server never reads it

            error_read, error_write = os.pipe()
            proc, errors = None, os.fdopen(error_read, "rb")
            answers = None  # its exercises judged apart: their answers' processes forked by a warm server too
            try:
                server = server_for([sys.executable, "-m", "synclab.lab.judge_worker", "--serve"], env, (SEED_ENV,))
                if job["answer_install"]:
                    try:
                        answers = answer_server.connect(answer_environment(env, job["grading_install"],
                                                                           job["answer_install"], drop=(SEED_ENV,)))
                    except OSError:  # no warm server: each answer's process starts afresh, as under a sandbox
                        answers = None
                group = server.start_job(job, env, cwd, write_end, error_write,
                                         answers.fileno() if answers is not None else None)
            finally:
                os.close(write_end)
                os.close(error_write)
                if answers is not None:
                    answers.close()  # the job holds it now; when the job ends, its answers' processes end with it
        with os.fdopen(read_end, "rb") as channel:
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([channel], [], [], left)
                if ready and not (chunk := os.read(channel.fileno(), 1 << 16)):
                    break  # every writer closed the channel
                if ready:
                    chunks.append(chunk)
        try:
            os.killpg(group, signal.SIGKILL)  # the worker's group: anything it or the reader's code started
        except (ProcessLookupError, PermissionError):
            pass
        stderr = errors.read().decode(errors="replace")  # type: ignore[union-attr]
        errors.close()  # type: ignore[union-attr]
        if proc is not None:
            proc.wait()
    if time.monotonic() >= deadline:
        stderr += "\nthe grader stopped its worker at its deadline, with everything the worker had started"
    return b"".join(chunks).decode(errors="replace").splitlines(), stderr, token


def _readable() -> list[str]:
    """The folders an answer may read while its checks run: the grading install's package and data, Python's."""
    install = grading_install()
    return [str(install / "synclab"), str(install / "data"), sys.prefix, sys.base_prefix, sys.exec_prefix]


@lru_cache(maxsize=1)
def grading_install() -> Path:
    """The package the worker imports: the students' image of this checkout, written once per grader process.

    Nothing beside it holds an answer (no ``solutions/``, labs as generated), so no loader that reads a path
    relative to the package finds one while the checks run; the grader's own checkout stays closed to the
    reader's code (``course_roots``)."""
    from synclab.lab.student_image import write_grading_install

    root = Path(synclab.__file__).resolve().parents[1]
    if not (root / "solutions").is_dir():  # a students' install already: no answer beside the package to hide
        return root
    dest = Path(tempfile.mkdtemp(prefix="synclab-grading-"))
    os.chmod(dest, 0o755)
    atexit.register(shutil.rmtree, dest, ignore_errors=True)
    return write_grading_install(root, dest / "install")


@lru_cache(maxsize=4)
def answer_install(keeps: tuple[str, ...] = ()) -> Path:
    """What the process of an answer judged apart imports: the grading install without the answers of the exercises
    judged apart, but for ``keeps`` (:func:`synclab.lab.student_image.write_answer_install`), written once per grader
    process."""
    from synclab.lab.student_image import write_answer_install

    dest = Path(tempfile.mkdtemp(prefix="synclab-answer-"))
    os.chmod(dest, 0o755)
    atexit.register(shutil.rmtree, dest, ignore_errors=True)
    return write_answer_install(grading_install(), dest / "install", keeps)


def judge_notebook(nb: NotebookNode, tasks: list[str] | None = None, trusted: NotebookNode | None = None,
                   time_limit_s: float = JUDGE_TIME_LIMIT_S, sandbox: list[str] | None = None,
                   scan: bool = True, closed: list[str] | None = None, reference: NotebookNode | None = None,
                   seed: int | None = None) -> dict[str, Verdict]:
    """Each exercise of ``nb`` (or of ``tasks``) judged by :mod:`synclab.lab.judge_worker`.

    An exercise another builds on is judged first (1.1 for 1.2), and reported only if asked for. ``sandbox``
    is a command the worker runs under (``setpriv --reuid=... --``: as a user who can read no course file);
    the worker reads its job on stdin and writes verdicts to a pipe, and starts in an empty folder it may
    not write to. ``scan=False`` leaves out the review lines of the reading of the cells
    (:mod:`synclab.lab.answer_scan`), so that the tests can show what the audit hook (:mod:`synclab.lab.audit`)
    records on its own.

    ``reference``: a notebook whose answers are right (the solutions; nbgrader's source). It is judged on the same
    seed, once per grading process, and every check the submission passed counts only where it saw the results
    the right answers gave (:func:`verify`): the verdict then rests on what the grader verifies, not on what the
    submission's process reports.
    """
    if reference is not None and seed is None:
        seed = grading_seed()
    asked = tasks
    if tasks is not None:
        tasks = sorted({*tasks, *(d for t in tasks if t in EXERCISES for d in EXERCISES[t].builds_on)})
    chapter, exercises, setup, reviews = jobs_for(nb, tasks, trusted)
    if not scan:
        reviews = {task: [] for task in reviews}
    if not exercises:
        return {}
    problem = sandbox_problem(tuple(sandbox)) if sandbox else None
    if problem is not None:  # said before any grading: every exercise would otherwise score 0 in silence
        return {e["task"]: Verdict(e["task"], error=problem, review=reviews[e["task"]]) for e in exercises
                if asked is None or e["task"] in asked}
    lines, stderr, token = run_worker(chapter, exercises, setup, trusted is not None, time_limit_s, sandbox, closed,
                                      seed)
    verdicts: dict[str, Verdict] = {}
    forged = [line for line in lines if not line.startswith(token)]
    for line in lines:
        if not line.startswith(token):
            continue
        data = json.loads(line[len(token):])
        task = data["task"]
        if task in verdicts or task not in {e["task"] for e in exercises}:
            forged.append(line)
            continue
        verdicts[task] = from_worker(data, reviews[task])
    for exercise in exercises:
        task = exercise["task"]
        if task not in verdicts:
            verdicts[task] = Verdict(task, error="the grader's process ended before this exercise"
                                     + (f": {stderr.strip().splitlines()[-1]}" if stderr.strip() else ""),
                                     review=list(reviews[task]))
        if forged:
            verdicts[task].review.append("the grader's channel carried lines it did not write")
    if reference is not None:
        right = _reference_verdicts(nbformat.writes(reference), nbformat.writes(trusted) if trusted else "",
                                    tuple(tasks or ()), time_limit_s, tuple(closed or ()), seed)
        for task, verdict in verdicts.items():
            verify(verdict, right.get(task))
    return {t: v for t, v in verdicts.items() if asked is None or t in asked}


# A grading run of many processes (synclab autograde: one nbgrader process per student) shares one seed and one
# folder for the right answers' verdicts, so that they are judged once for the whole run, not once per student.
GRADING_SEED_ENV = "SYNCLAB_GRADING_SEED"
REFERENCE_CACHE_ENV = "SYNCLAB_REFERENCE_CACHE"


def grading_seed() -> int:
    """The seed of this grading run's checks: the run's own where one is set, else drawn once per process, so that
    one judging of the right answers serves every submission (the cases are new to each run, the same for every
    student in it)."""
    given = os.environ.get(GRADING_SEED_ENV, "")
    return int(given) if given.isdigit() else _drawn_seed()


@lru_cache(maxsize=1)
def _drawn_seed() -> int:
    return secrets.randbelow(10**6)


@lru_cache(maxsize=16)
def _reference_verdicts(reference: str, trusted: str, tasks: tuple[str, ...], time_limit_s: float,
                        closed: tuple[str, ...], seed: int) -> dict[str, Verdict]:
    """The right answers' verdicts on ``seed``: once per process, and once per grading run where the run keeps
    them in a folder of its own (``REFERENCE_CACHE_ENV``, in the course folder, which no answer may read)."""
    folder = os.environ.get(REFERENCE_CACHE_ENV, "")
    key = hashlib.sha256(json.dumps([reference, trusted, tasks, time_limit_s, closed, seed]).encode()).hexdigest()
    kept = Path(folder) / f"{key[:32]}.json" if folder else None
    if kept is None:
        return _judge_reference(reference, trusted, tasks, time_limit_s, closed, seed)
    kept.parent.mkdir(parents=True, exist_ok=True)
    # one process of the run judges them while the others that need them wait (a run's first students start
    # together): each would otherwise judge the same right answers again
    with open(kept.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if kept.exists():
            return {task: Verdict.from_dict(data) for task, data in json.loads(kept.read_text()).items()}
        verdicts = _judge_reference(reference, trusted, tasks, time_limit_s, closed, seed)
        # written whole, then renamed: a process reading it meanwhile finds it or nothing
        partial = kept.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({task: v.to_dict() for task, v in verdicts.items()}))
        os.replace(partial, kept)
    return verdicts


def _judge_reference(reference: str, trusted: str, tasks: tuple[str, ...], time_limit_s: float,
                     closed: tuple[str, ...], seed: int) -> dict[str, Verdict]:
    return judge_notebook(nbformat.reads(reference, as_version=4), list(tasks) or None,
                          nbformat.reads(trusted, as_version=4) if trusted else None, time_limit_s, scan=False,
                          closed=list(closed), seed=seed)


VERIFY_FAILED = ("the grader could not verify it: the results this check saw differ from a right answer's on the "
                 "same cases")


def verify(verdict: Verdict, right: Verdict | None) -> None:
    """Count each check ``verdict`` passed only where its witness (the digest of the results it found right) is the
    right answer's on the same seed. The submission's process reports the outcomes; only the results are
    verified here, out of its reach. A check the right answer did not pass, or that witnesses nothing, stands as
    reported."""
    if verdict.report is None or right is None or right.report is None:
        return
    expected = {o.key: right.witnesses.get(o.key, "") for o in right.report.outcomes if o.ok}
    expected = {key: digest for key, digest in expected.items() if digest}
    outcomes = []
    for o in verdict.report.outcomes:
        if o.ok and o.key in expected and verdict.witnesses.get(o.key, "") != expected[o.key]:
            verdict.witnesses[o.key] = ""
            o = replace(o, status="failed", message=VERIFY_FAILED,
                        hint="if your answer is right, tell your instructor: the grader's record says which check")
            verdict.notes.append(f"[{o.task}] {o.name}: its passed check was not confirmed by the results")
        outcomes.append(o)
    verdict.report.outcomes = outcomes


@lru_cache(maxsize=8)
def sandbox_problem(sandbox: tuple[str, ...]) -> str | None:
    """Why the grader's worker cannot run under ``sandbox``, or None when it can: its user must run the grader's
    Python and import its packages (the package it grades with is a copy every user reads, see
    :func:`grading_install`). A virtual environment in a 0700 home or a ``mktemp -d`` folder is out of that
    user's reach, and every exercise would score 0."""
    with tempfile.TemporaryDirectory(prefix="synclab-sandbox-") as cwd:
        os.chmod(cwd, 0o755)
        try:
            # what the worker imports first: torch (the environment's) and the grading install's synclab
            probe = "import torch, synclab.lab.judge_worker"
            proc = subprocess.run([*sandbox, sys.executable, "-c", probe], cwd=cwd, env=_worker_env(),
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the sandbox command {' '.join(sandbox)!r} did not run: {exc}"
    if proc.returncode == 0:
        return None
    said = (proc.stderr.strip().splitlines() or ["no message"])[-1]
    return (f"the grader's worker cannot start under the sandbox {' '.join(sandbox)!r} ({said}): its user must be "
            f"able to run the grader's Python, {sys.executable}, and read the packages it imports (torch and the "
            f"rest): chmod o+rx on the environment and every folder above it, or install the course's environment "
            f"where that user can read it. Nothing was graded")


def _worker_env(seed: int | None = None) -> dict[str, str]:
    """The reader's code must not tell it is graded, nor find the course: no nbgrader or report variables. ``seed``:
    the one every check draws its cases from (a run that is verified against a right answer's uses the same)."""
    from synclab.checks import TIME_SCALE_ENV
    from synclab.lab.judge_worker import SEED_ENV
    from synclab.run_modes import DEVICE_ENV, SIMULATED, reader_environment  # no torch: nbgrader's process needs none

    env = reader_environment()
    # nor the harness it runs under (pytest names the test running: a warm worker is kept per environment)
    env = {k: v for k, v in env.items()
           if not k.startswith(("NBGRADER", "SYNCLAB_CHECK_LOG", "JPY_", "JUPYTER", "PYTEST_"))}
    # Judged on the simulated device on every machine: the counts and results are the same as on a GPU, and the
    # verdict never depends on the grader's hardware (nor meets CUDA, which a forked child may not start twice).
    env[DEVICE_ENV] = SIMULATED
    if seed is not None:
        env[SEED_ENV] = str(seed)
    if TIME_SCALE_ENV in os.environ:  # the grader's own setting (the tests' short limits), never the reader's
        env[TIME_SCALE_ENV] = os.environ[TIME_SCALE_ENV]
    # the worker imports the grading install's synclab, whatever else the path holds (it starts in a temp dir)
    env["PYTHONPATH"] = os.pathsep.join([str(grading_install()), *filter(None, [env.get("PYTHONPATH")])])
    return env

