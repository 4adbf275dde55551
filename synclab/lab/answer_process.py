"""An answer's own process: it holds the reader's cells and answers calls with plain data, and nothing else.

Started by the grader (:mod:`synclab.lab.judged_apart`) for an exercise judged apart, as a fresh Python that
imports the students' install (where the exercise's references are not shipped). It reads one job, the lab's setup
cells and the reader's cells, on its request pipe; runs them as a kernel would, under the sandbox's audit hook; says
what each name the exercise defines is (a function to call, or a value, as data); then answers each call the grader
makes, with the arguments it is sent, by the result as data (:mod:`synclab.answer_keys.plain_data`) or the exception
raised. A call may also ask for one of the package's runners on the answer (4.1's ``step_outcome`` on the reader's
batch class): the case is built here, and what comes back is what the check compares.

It holds no expected result, no reference implementation, no verdict and no token: the checks run in the grader's
process and compare what comes back. What it writes on its reply pipe is the answer's word, like its return values.
"""

from __future__ import annotations

import builtins
import importlib
import json
import linecache
import os
import sys
import traceback
from typing import Any

from synclab.answer_keys import answer_in, checking, refuse
from synclab.checks import CheckFailed, attach_observer
from synclab.lab.audit import READER_FILES, ChildAudit, ChildrenAudited, arm
from synclab.lab.cell_runner import load_cells, run_setup
from synclab.answer_keys.plain_data import decode, encode


def _raised(exc: BaseException) -> dict[str, Any]:
    """An exception as data: its type, message, and the reader's line it came from (the deepest one)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(READER_FILES)]
    where = frames[-1] if frames else None
    kind = type(exc)
    raised = {"type": kind.__name__, "module": kind.__module__, "message": str(exc)[:2000],
              "args": [encode(a) for a in exc.args[:8]],
              "filename": where.filename if where else "", "lineno": where.lineno if where else 0,
              "function": where.name if where else ""}
    deepest = traceback.extract_tb(exc.__traceback__)[-1:]
    if isinstance(exc, CheckFailed) and deepest and not deepest[0].filename.startswith(READER_FILES):
        # raised by a collaborator of the package's that holds the answer to a contract (5.2's range): a check's
        # failure, as in the notebook, where only the reader's own CheckFailed is a crash
        raised["check"] = {k: encode(getattr(exc, k)) for k in ("expected", "got", "hint", "case")}
    return raised


def _describe(namespace: dict, names: list[str]) -> dict[str, Any]:
    """What each name is: absent, a callable the grader calls here, or a value sent as data."""
    described: dict[str, Any] = {}
    for name in names:
        if name not in namespace:
            described[name] = {"absent": True}
        elif callable(namespace[name]):
            described[name] = {"callable": True}
        else:
            described[name] = {"value": encode(namespace[name])}
    return described


def _runner(name: str) -> Any:
    """The package's function ``module:function`` that the grader asked to run on the answer."""
    module, _, function = name.partition(":")
    if module.split(".")[0] != "synclab":
        raise ValueError(f"not a runner of the package's: {name}")
    return getattr(importlib.import_module(module), function)


def _run(task: str, runner: Any, answer: Any, args: list[Any]) -> Any:
    """``runner(answer, *args)`` as the exercise's checks run it in a notebook: the package's answers and vLLM's code
    before the PR refuse the answer meanwhile, even where the answer caught the refusal."""
    handed = answer_in(answer, task)
    if handed is not None:  # the package's answer itself (a subclass of vLLM's code before the PR): as run_checks does
        raise refuse(handed)
    with checking(task) as seen:
        result = runner(answer, *args)
    if seen.refused:
        raise refuse(seen.refused[0])
    return result


def _bind_stand_in(namespace: dict, stand_in: dict) -> None:
    """Bind the package's version of an earlier exercise, sent as source because this install does not ship it (a
    1.2 whose 1.1 failed runs on the package's 1.1), under the name the reader's cells give it; its module's names
    are its globals, as where it was written."""
    scope = dict(vars(importlib.import_module(stand_in["module"])))
    filename = f"<the package's {stand_in['defines']}>"
    linecache.cache[filename] = (len(stand_in["source"]), None, stand_in["source"].splitlines(True), filename)
    exec(compile(stand_in["source"], filename, "exec"), scope)
    namespace[stand_in["name"]] = scope[stand_in["defines"]]


def serve(requests: Any, replies: Any) -> None:
    """Run the job read from ``requests``, then answer calls until the grader ends it."""

    def reply(data: dict) -> None:
        replies.write(json.dumps(data) + "\n")
        replies.flush()

    job = json.loads(requests.readline())
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    notes: list[str] = []
    for n, source in enumerate(job["setup"], start=1):
        notes += [note for note, bound in run_setup(source, f"<setup cell {n}>", namespace)
                  if bound & set(job["reads"])]
    for stand_in in job.get("stand_ins", []):
        _bind_stand_in(namespace, stand_in)
    refused = arm(tuple(job["course_roots"]), tuple(job["readable"]))
    # the processes a runner starts (3.7's ranks) run under the same hook; what it records there is recorded here
    attach_observer(ChildrenAudited(ChildAudit(tuple(job["course_roots"]), tuple(job["readable"]), refused)))
    error = load_cells(namespace, job["cells"], job["task"], notes)
    reply({"notes": notes, "error": error or "", "names": _describe(namespace, job["names"])})
    for line in requests:
        request = json.loads(line)
        if "end" in request:
            break
        try:
            args = [decode(a) for a in request["args"]]
            if "run" in request:  # a runner of the package's, on the answer (4.1's step_outcome on its class)
                result = _run(job["task"], _runner(request["run"]), namespace[request["on"]], args)
            else:
                result = namespace[request["call"]](*args)
            answer = {"returned": encode(result)}
        except BaseException as exc:  # noqa: BLE001 - the answer's exception is part of its answer
            answer = {"raised": _raised(exc)}
        reply(answer)
    reply({"refused": list(dict.fromkeys(refused))})


def main() -> int:
    requests_fd, replies_fd = int(sys.argv[1]), int(sys.argv[2])
    with os.fdopen(requests_fd, "r") as requests, os.fdopen(replies_fd, "w") as replies:
        serve(requests, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
