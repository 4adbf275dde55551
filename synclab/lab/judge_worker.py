"""The grader's worker: judge a notebook's exercises, each in a fresh process that no other cell of it ran in.

Started by :mod:`synclab.lab.judge` (``python -m synclab.lab.judge_worker``), never by a notebook. It reads
one job on stdin (the notebook's trusted setup cells, and per exercise its answer cells and its check
call), imports the chapter, then for each exercise forks a child that runs none of the reader's code:

1. the child starts the answer's own process (:mod:`synclab.lab.judged_apart`), which runs the setup cells and the
   reader's cells before the check cell **whole**, as the notebook ran them, under the sandbox's audit hook
   (:mod:`synclab.lab.audit`);
2. it evaluates the check call here, with each name the answer defines bound to a stand-in for it there: the checks,
   their expected results and the references stay in this process, and only data crosses.

What the audit hook records becomes review lines for the instructor; the score is the checks' alone. The verdict goes
back on a pipe, one line per exercise, prefixed with a token from the judge. What the answer's process counts is its
word, as the instructors' page says ("What the grades are good for").
"""

from __future__ import annotations

import ast
import builtins
import inspect
import importlib
import json
import os
import select
import signal
import sys
import time
from typing import Any

from synclab.lab.audit import enforced
from synclab.lab.cell_runner import used_names

SEED_ENV = "SYNCLAB_CHECK_SEED"  # the seed every check draws its random cases from (the judge sets it)

def _check_names(check: str, package: str) -> dict[str, Any]:
    """The names the check call reaches the chapter through (``primer`` in ``primer.check_decode_step(...)``),
    bound to the chapter's package."""
    func = ast.parse(check, mode="eval").body.func  # type: ignore[attr-defined]
    while isinstance(func, ast.Attribute):
        func = func.value
    return {func.id: importlib.import_module(package)} if isinstance(func, ast.Name) else {}


def _failed_before(exercise: dict, passed: dict[str, bool], verdict: dict[str, Any]) -> list[str]:
    """The exercises ``exercise`` builds on that failed their own checks: it is judged on the package's version of
    them (its ``stand_in``), so that their bugs cost them alone; said in the verdict's notes."""
    task = exercise["task"]
    failed = [dep for dep in exercise["builds_on"] if not passed.get(dep)]
    for dep in failed:
        verdict["notes"].append(f"Exercise {dep} did not pass its own checks, so Exercise {task} was judged on the "
                                f"package's {dep} in its place: a bug in {dep} costs {dep}'s points only")
    return failed


def _stand_in_sources(exercise: dict) -> list[dict[str, str]]:
    """The package's versions of the exercises ``exercise`` builds on, as source for the answer's process, whose
    install does not ship them: each class's module, its source, and the name the reader's cells give it."""
    stand_ins = []
    for name, target in exercise["stand_in"]:
        module, attr = target.split(":")
        source = inspect.getsource(getattr(importlib.import_module(module), attr))
        stand_ins.append({"name": name, "module": module, "defines": attr, "source": source})
    return stand_ins


def judge_here(exercise: dict, job: dict, passed: dict[str, bool]) -> dict:
    """Judge one exercise in this (fresh, forked) process; the verdict as a dict. Its answer runs in a process of its
    own (:mod:`synclab.lab.judged_apart`): this one runs the checks and none of the reader's code. Where an exercise
    it builds on failed its checks (``passed``), the answer's process is sent the package's version of it in place of
    the reader's cells that define it: a 1.2 whose 1.1 is wrong runs on the package's 1.1, which that answer then
    holds (1.1's points are lost already)."""
    from synclab.checks import CheckReport, attach_observer
    from synclab.lab import judged_apart
    from synclab.lab.witnesses import WitnessRecorder

    task = exercise["task"]
    verdict: dict[str, Any] = {"task": task, "report": None, "review": [], "notes": [], "error": ""}
    used = used_names([c["source"] for c in exercise["cells"]] + [exercise["check"]])
    failed = _failed_before(exercise, passed, verdict)
    if failed:
        exercise = {**exercise, "cells": [c for c in exercise["cells"] if not set(c["answers"]) & set(failed)],
                    "stand_ins": _stand_in_sources(exercise)}
    # no seed of the grader's; the install without the answers judged apart, in the grading install's place (one of
    # its own where the exercise's runners run some of them: a fresh Python, not one forked by the job's server)
    install = exercise.get("answer_install") or job["answer_install"]
    env = judged_apart.answer_environment(dict(os.environ), job["grading_install"], install, drop=(SEED_ENV,))
    if install != job["answer_install"]:
        job = {**job, "answer_server_fd": None}
    process, names = judged_apart.start(exercise, job, job["setup"], used, env, verdict)
    if process is None:
        return verdict
    seed = os.environ.get(SEED_ENV, "")
    recorder = WitnessRecorder(int(seed) if seed.isdigit() else None)
    attach_observer(recorder)
    namespace: dict[str, Any] = {"__builtins__": builtins, **names,
                                 **_check_names(exercise["check"], job["imports"][0])}
    try:
        report = eval(compile(exercise["check"], f"<check {task}>", "eval"), namespace)
    except BaseException as exc:  # noqa: BLE001 - the checks themselves broke
        verdict["error"] = f"the checks broke: {type(exc).__name__}: {exc}"
        report = None
    finally:
        attach_observer(None)
        refused = process.end()
    if isinstance(report, CheckReport):
        verdict["report"] = report.to_dict()
        verdict["witnesses"] = recorder.witnesses(report)
    elif not verdict["error"]:
        verdict["error"] = f"the check returned {type(report).__name__}, not a report"
    verdict["review"] += [f"the grader's sandbox {'refused' if enforced(why) else 'saw'} {why} (the answer's process "
                          f"says so)" for why in refused]
    return verdict


def _in_a_fork(exercise: dict, job: dict, passed: dict[str, bool], channel: int) -> dict:
    """:func:`judge_here` in a forked child, with a time limit; its verdict, or what stopped it."""
    read_end, write_end = os.pipe()
    token = job["token"]
    pid = os.fork()
    if pid == 0:  # the child: nothing of the reader's has run in this process
        os.close(read_end)
        os.close(channel)  # the worker's channel to the judge is not the child's to write
        try:
            verdict = judge_here(exercise, job, passed)
        except BaseException as exc:  # a setup cell or the check machinery itself broke
            verdict = {"task": exercise["task"], "report": None, "review": [], "notes": [],
                       "error": f"the grader could not run the checks: {type(exc).__name__}: {exc}"}
        os.write(write_end, (token + json.dumps(verdict) + "\n").encode())
        os._exit(0)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + job["time_limit_s"]
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([read_end], [], [], left)
        if not ready:
            continue
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    else:
        os.kill(pid, signal.SIGKILL)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    lines = b"".join(chunks).decode(errors="replace").splitlines()
    base = {"task": exercise["task"], "report": None, "review": [], "notes": []}
    if time.monotonic() >= deadline:
        return {**base, "error": f"the grader stopped it after {job['time_limit_s']:g} s"}
    mine = [line[len(token):] for line in lines if line.startswith(token)]
    if len(lines) != 1 or len(mine) != 1 or os.waitstatus_to_exitcode(status) != 0:
        return {**base, "error": "its process did not hand back one verdict",
                "review": ["wrote to the grader's channel, or ended its process during the checks"]}
    return json.loads(mine[0])


def _warm(warm_up: Any) -> None:
    """Run ``warm_up`` on one intra-op thread: a thread pool started here would not exist in the forked children,
    and their first parallel torch call would wait for it forever."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        warm_up()
    finally:
        torch.set_num_threads(threads)


_WARMED: set[tuple[str, str]] = set()  # (module, task): warm-ups a server already ran for every job it forks


def prepare(job: dict) -> None:
    """Import the job's packages and run their warm-ups: only the package's own work, before any answer is loaded,
    so that the children inherit it."""
    for module in job["imports"]:
        importlib.import_module(module)  # imports only: the children fork from a process that ran no cell
    for exercise in job["exercises"]:
        for module in job["imports"]:
            warm_up = getattr(sys.modules[module], "GRADER_WARM_UP", {}).get(exercise["task"])
            if warm_up is not None and (module, exercise["task"]) not in _WARMED:
                _warm(warm_up)
                _WARMED.add((module, exercise["task"]))


def run_job(job: dict) -> int:
    """Judge the job's exercises, each in a child forked for it; each verdict on the job's channel."""
    channel = job["channel_fd"]
    passed: dict[str, bool] = {}
    for exercise in job["exercises"]:
        verdict = _in_a_fork(exercise, job, passed, channel)
        report = verdict.get("report")
        passed[exercise["task"]] = bool(report and report["passed"])
        os.write(channel, (job["token"] + json.dumps(verdict) + "\n").encode())
    return 0


def main() -> int:
    if sys.argv[1:2] == ["--serve"]:  # kept warm by the judge: jobs come on the socket (synclab.lab.worker_server)
        from synclab.lab.worker_server import serve

        return serve(int(sys.argv[2]), prepare, run_job)
    job = json.loads(sys.stdin.read())
    prepare(job)
    return run_job(job)


if __name__ == "__main__":
    sys.exit(main())
