"""Judged apart: the checks run in the grader's process, the answer in a process of its own, and only data crosses.

Used by the grader's worker (:mod:`synclab.lab.judge_worker`) for every exercise. The worker's child for an
exercise runs none of the reader's code. It starts the answer's process
(:mod:`synclab.lab.answer_process`: a fresh Python on the students' install, where the exercise's references are not
shipped), sends it the setup and the reader's cells, and evaluates the check call with each name the answer defines
bound here to what it is there: a value, as data, or a function whose calls go over the pipe with their arguments and
come back as the result, or as the exception it raised (raised again here, from the reader's line, so that the
report names it as it would in the notebook). An answer that is code the checks run (4.1's batch, 6.1's runner) runs
there by the chapter's runners (:mod:`synclab.answer_keys.runners`), which the checks call with the answer's stand-in
here: each builds its case there, runs the answer, and sends back what the check compares.

So the expected results, the references and the verdict stay in this process; what the answer's process holds is
the answer, the arguments it is sent and the students' package.
"""

from __future__ import annotations

import builtins
import json
import linecache
import os
import signal
import subprocess
import sys
import tempfile
from typing import Any

from synclab.answer_keys.plain_data import decode, encode
from synclab.lab import answer_server

ANSWER_START_S = 120.0  # the answer's process: imports, setup and the reader's cells, before any call


class AnswerProcess:
    """The answer's process, seen from the grader: start it with a job, call what it defines, end it."""

    def __init__(self, env: dict[str, str], server_fd: int | None = None, imports: tuple[str, ...] = ()) -> None:
        """Start it with ``env``: forked by the answers' server on the connection ``server_fd`` where the job has one
        (:mod:`synclab.lab.answer_server`, which imports ``imports`` first), else a fresh Python."""
        to_answer, self._requests = os.pipe()
        self._replies, from_answer = os.pipe()
        self._cwd = tempfile.TemporaryDirectory(prefix="synclab-answer-")
        os.chmod(self._cwd.name, 0o755)  # empty; a sandboxed user may enter it, not write to it
        self._proc: subprocess.Popen | None = None
        self._server: answer_server.Connection | None = None
        if server_fd is not None:
            errors, errors_there = os.pipe()
            self._server = answer_server.Connection(server_fd)
            try:
                self._pid = self._server.start(env, self._cwd.name, list(imports), (to_answer, from_answer,
                                                                                     errors_there))
            finally:
                os.close(errors_there)
            self._stderr = os.fdopen(errors, "rb")
        else:
            # This interpreter, as it runs: a sandbox's user may run it without reaching the folder it was started
            # from (a 0700 home holding the Python install); named as before, so that it finds the same environment.
            this_python = "/proc/self/exe" if os.path.exists("/proc/self/exe") else sys.executable
            self._proc = subprocess.Popen([sys.executable, "-m", "synclab.lab.answer_process", str(to_answer),
                                           str(from_answer)], executable=this_python,
                                          pass_fds=(to_answer, from_answer), env=env, cwd=self._cwd.name,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self._pid, self._stderr = self._proc.pid, self._proc.stderr
        os.close(to_answer)
        os.close(from_answer)
        self._out = os.fdopen(self._requests, "w")
        self._in = os.fdopen(self._replies, "r")
        self.stopped = ""  # why it no longer answers (a time limit ran out while it worked)

    def ask(self, request: dict, limit_s: float | None = None) -> dict:
        """Send ``request``; its reply. A time limit that interrupts the wait (a check's) stops the process."""
        if self.stopped:
            raise _timeout(self.stopped)
        done = False
        try:
            self._out.write(json.dumps(request) + "\n")
            self._out.flush()
            line = self._readline(limit_s)
            done = True
        finally:
            if not done:
                self.stopped = "the answer's process was stopped when an earlier call ran out of time"
                self.kill()
        if not line:
            raise AnswerProcessEnded(self._last_words())
        return json.loads(line)

    def _readline(self, limit_s: float | None) -> str:
        if limit_s is None:
            return self._in.readline()

        def on_alarm(signum: int, frame: Any) -> None:
            raise _timeout(f"the answer's process did not load its cells within {limit_s:g} s")

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        try:
            return self._in.readline()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def _last_words(self) -> str:
        self.kill(keep_stderr=True)
        said = (self._stderr.read().decode(errors="replace").strip().splitlines()  # type: ignore[union-attr]
                or ["no message"])[-1]
        self._stderr.close()  # type: ignore[union-attr]
        return f"the answer's process ended ({said[:200]})"

    def end(self) -> list[str]:
        """End it; what its audit hook refused or recorded (its word: it ran the answer)."""
        if self.stopped:
            return []
        try:
            reply = self.ask({"end": True}, limit_s=10.0)
        except BaseException:  # noqa: BLE001 - a process that cannot end cleanly is stopped
            self.kill()
            return []
        self.kill()
        return [str(line) for line in reply.get("refused", [])]

    def kill(self, keep_stderr: bool = False) -> None:
        """Stop it, and close what this side held of it (its stderr stays open for its last words)."""
        if self._server is not None:
            self._server.kill(self._pid)  # the server's child: it kills its session and collects it
            self._server.close()
            self._server = None
        elif self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
        for pipe in (self._out, self._in) if keep_stderr else (self._out, self._in, self._stderr):
            try:
                pipe.close()  # type: ignore[union-attr]
            except OSError:  # a request it never read: nothing more to say to a stopped process
                pass
        self._cwd.cleanup()


class AnswerProcessEnded(RuntimeError):
    """The answer's process ended while the grader waited for it (the answer exited, or crashed the interpreter)."""


def _timeout(message: str) -> BaseException:
    from synclab.checks import CheckTimeout

    return CheckTimeout(message)


def _exception(raised: dict) -> BaseException:
    """The answer's exception, rebuilt: a built-in one as itself, the checks' own as theirs, else one of its name."""
    from synclab.checks import CheckFailed

    name, module, message = str(raised["type"]), str(raised["module"]), str(raised["message"])
    kind = getattr(builtins, name, None) if module == "builtins" else None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:  # with its arguments, so that it says what it said there (KeyError(0) is "0", not "'0'")
            return kind(*[decode(a) for a in raised.get("args", [])]) if raised.get("args") else kind(message)
        except Exception:  # noqa: BLE001 - a built-in exception that wants other arguments
            pass
    if (module, name) == ("synclab.checks", "CheckFailed"):
        return CheckFailed(message, **{k: decode(v) for k, v in raised.get("check", {}).items()})
    safe = name if name.isidentifier() else "AnswerError"
    return type(safe, (Exception,), {"__module__": module})(message)


def _raise_from_the_readers_line(exc: BaseException, raised: dict) -> None:
    """Raise ``exc`` from a frame named as the reader's line was (its cell, its line, its function), so that a report
    says where the reader's code broke, as it would in the notebook."""
    filename, lineno, function = str(raised["filename"]), int(raised["lineno"]), str(raised["function"])
    if not filename or lineno < 1:
        raise exc
    namespace = {"__exc": exc}
    if lineno >= 2 and function.isidentifier():
        source = "\n" * (lineno - 2) + f"def {function}():\n    raise __exc\n"
        exec(compile(source, filename, "exec"), namespace)
        namespace[function]()
    exec(compile("\n" * (lineno - 1) + "raise __exc\n", filename, "exec"), namespace)


class RemoteFunction:
    """A function the answer defines, called in its own process: arguments and result as data."""

    def __init__(self, process: AnswerProcess, name: str) -> None:
        self._process, self.__name__ = process, name

    def __call__(self, *args: Any) -> Any:
        return self._answer({"call": self.__name__, "args": [encode(a) for a in args]})

    def run_there(self, runner: str, *args: Any) -> Any:
        """Run the package's ``runner`` (``module:function``) in the answer's process, on the answer and ``args``:
        for an answer that is not a function of data (a class whose steps a check runs, such as 4.1's batch),
        the runner builds the case there and sends back what the check compares, as data."""
        return self._answer({"run": runner, "on": self.__name__, "args": [encode(a) for a in args]})

    def _answer(self, request: dict) -> Any:
        reply = self._process.ask(request)
        if "raised" in reply:
            if "check" in reply["raised"]:  # a check's failure, raised by the package's code there: raised here
                raise _exception(reply["raised"])
            _raise_from_the_readers_line(_exception(reply["raised"]), reply["raised"])
        return decode(reply["returned"])

    def __repr__(self) -> str:
        return f"<{self.__name__}, in the answer's process>"


def answer_environment(worker_env: dict[str, str], grading_install: str, answer_install: str,
                       drop: tuple[str, ...] = ()) -> dict[str, str]:
    """The answer's process's environment: the worker's, less ``drop`` (the grader's seed), importing the install
    without the answers judged apart in the grading install's place."""
    env = {k: v for k, v in worker_env.items() if k not in drop}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != grading_install]
    env["PYTHONPATH"] = os.pathsep.join([answer_install, *paths])
    return env


def remember_cells(task: str, cells: list[dict]) -> None:
    """The reader's cells under the names the answer's process runs them by, so that a line it names reads back."""
    for n, cell in enumerate(cells, start=1):
        filename = f"<Exercise {task}, cell {n}>" if task in cell["answers"] else f"<your cell {n}>"
        linecache.cache[filename] = (len(cell["source"]), None, cell["source"].splitlines(True), filename)


def start(exercise: dict, job: dict, setup: list[str], reads: set[str], env: dict[str, str],
          verdict: dict) -> tuple[AnswerProcess | None, dict[str, Any]]:
    """Start the answer's process for ``exercise`` and load its cells there; the process and the names it defines,
    as the check call will see them (None and {} when it could not load: ``verdict`` then says why)."""
    process = AnswerProcess(env, job.get("answer_server_fd"), tuple(job.get("imports", ())))
    load = {"task": exercise["task"], "setup": setup, "cells": exercise["cells"], "names": exercise["defines"],
            "stand_ins": exercise.get("stand_ins", []),
            "reads": sorted(reads), "course_roots": job["course_roots"], "readable": job["readable"]}
    try:
        loaded = process.ask(load, limit_s=ANSWER_START_S)
    except BaseException as exc:  # noqa: BLE001 - its time limit, or its end (AnswerProcessEnded)
        process.kill()
        verdict["error"] = str(exc) or "the answer's process did not load its cells"
        return None, {}
    verdict["notes"] += loaded["notes"]
    missing = [name for name, what in loaded["names"].items() if what.get("absent")]
    if loaded["error"] or missing:
        verdict["error"] = loaded["error"] or f"the notebook defines no {', '.join(missing)}"
        process.end()
        return None, {}
    remember_cells(exercise["task"], exercise["cells"])
    names = {name: RemoteFunction(process, name) if what.get("callable") else decode(what["value"])
             for name, what in loaded["names"].items()}
    return process, names
