"""The grader's worker: judge a notebook's exercises, each in a fresh process that no other cell of it ran in.

Started by :mod:`synclab.lab.judge` (``python -m synclab.lab.judge_worker``), never by a notebook. It reads
one job on stdin (the notebook's trusted setup cells, and per exercise its answer cells and its check
call), imports the chapter, then for each exercise forks a child that has run nothing of the reader's:

1. the child runs the setup cells (imports, fixtures: the notebook's locked cells, or the pristine lab's);
2. it runs the reader's cells before the exercise's check cell **whole**, as the notebook ran them, under the
   sandbox's audit hook (:mod:`synclab.lab.audit`);
3. it evaluates the check call, with a tracer that notes what an instructor may want to read (a call of the
   package's answers around their guard, a thread of the reader's, code disguised as the package's);
4. it compares the check machinery (every function and class of ``synclab`` and of the modules the checks
   rely on: ``builtins``, ``torch``, ...) with what it was before the reader's cells ran.

What steps 2-4 find becomes review lines for the instructor; the score is the checks' alone. The verdict goes back
on a pipe, one line per exercise, prefixed with a token from the judge. What code in the same process can still do
is on the instructors' page ("What the grades are good for").
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import importlib
import json
import operator
import os
import select
import signal
import sys
import threading
import time
import types
from typing import Any, Iterator

from synclab.lab.audit import ChildAudit, arm, enforced
from synclab.lab.cell_runner import load_cells, run_setup, used_names

SEED_ENV = "SYNCLAB_CHECK_SEED"  # the seed every check draws its random cases from (the judge sets it)

# Modules the checks' verdicts rely on besides synclab itself: rebinding a function of one (torch.equal)
# would change a verdict without changing the reader's code.
WATCHED = ("builtins", "sys", "os", "random", "math", "json", "functools", "operator", "threading", "signal", "copy",
           "contextlib", "dataclasses", "collections", "itertools", "statistics", "traceback", "inspect", "torch",
           "torch.testing", "torch.nn.functional", "numpy")
# What the simulated GPU swaps for its own while it runs (synclab.sim.cuda.simulated_cuda), and puts back: not machinery
# the cells changed. (torch.cuda's own names are swapped too; that module is not watched.)
SIMULATION_SWAPS = {"torch.Event"}


def _identity(value: Any) -> tuple:
    code = getattr(value, "__code__", None)
    return (id(value), id(code) if code is not None else 0)


def _is_watched(name: str) -> bool:
    """Whether the module ``name`` holds what the checks call: synclab's, and :data:`WATCHED`."""
    return name in WATCHED or name == "synclab" or name.startswith("synclab.")


def _watched() -> Iterator[tuple[str, Any, str, Any]]:
    """Every function and class of synclab and of :data:`WATCHED` modules (and the members of synclab's classes
    and of ``torch.Tensor``), each as ``(name, the mapping it is read from, its key there, its value)``."""
    for name, module in list(sys.modules.items()):
        if module is None or not _is_watched(name):
            continue
        space = vars(module)
        for attr, value in list(space.items()):
            if isinstance(value, types.ModuleType) or not (callable(value) or isinstance(value, property)) \
                    or f"{name}.{attr}" in SIMULATION_SWAPS:
                continue
            yield f"{name}.{attr}", space, attr, value
            if isinstance(value, type) and getattr(value, "__module__", "") == name and name.startswith("synclab"):
                members = vars(value)  # a live view: a method set on the class later shows in it
                for member, inner in list(members.items()):
                    if _is_code(inner):  # methods and descriptors; a class's counters are state, not machinery
                        yield f"{name}.{attr}.{member}", members, member, inner
    torch = sys.modules.get("torch")
    if torch is not None:
        for cls in (torch.Tensor, torch._C.TensorBase):
            members = vars(cls)
            for member, inner in list(members.items()):
                if _is_code(inner):
                    yield f"torch.{cls.__name__}.{member}", members, member, inner


def _marks_key(cls: type) -> str:
    return f"torch.{cls.__name__} (the device's marks)"


def _marks(cls: type) -> tuple:
    """The simulated device's marks live on each tensor, never on the class: one there (a property that hides the
    mark of every tensor) is a change too."""
    return (frozenset(n for n in vars(cls) if n.startswith("_synclab")),)


def _tensor_classes() -> tuple[type, ...]:
    torch = sys.modules.get("torch")
    return (torch.Tensor, torch._C.TensorBase) if torch is not None else ()


def fingerprint() -> dict[str, tuple]:
    """What the checks call (:func:`_watched`), by identity."""
    seen = {key: _identity(value) for key, _, _, value in _watched()}
    for cls in _tensor_classes():
        seen[_marks_key(cls)] = _marks(cls)
    return seen


_GONE = object()


class Lookout:
    """The two fingerprints read again quickly, each name of ``before`` from the mapping it was found in.

    The walks (:func:`fingerprint`, :func:`state_fingerprint`) visit every watched module and format five thousand
    names (10-20 ms); the tracer looks at every counting block's start and end, hundreds of times in a check. A
    look here compares, by identity, only what the first fingerprints hold. When something differs, or a module was
    replaced in ``sys.modules``, it walks them all again and answers as ``tampered`` does."""

    def __init__(self, before: dict[str, tuple], state_before: dict[str, tuple]) -> None:
        self._before, self._state_before = before, state_before
        self._modules = [(name, module) for name, module in list(sys.modules.items())
                         if module is not None and _is_watched(name)]
        found = [(key, space, attr, value) for key, space, attr, value in _watched()
                 if key in before and before[key] == _identity(value)]
        self._complete = len(found) + len(_tensor_classes()) == len(before)
        by_space: dict[int, tuple[Any, list[str], list[Any]]] = {}
        for _, space, attr, value in found:
            _, attrs, values = by_space.setdefault(id(space), (space, [], []))
            attrs.append(attr)
            values.append(value)
        self._spaces = list(by_space.values())  # (mapping, its names, their values), for one C-level pass each
        coded = [(value, code) for *_, value in found if (code := getattr(value, "__code__", None)) is not None]
        self._functions, self._codes = [v for v, _ in coded], [c for _, c in coded]
        # the walk reads a class's members only while the class says it is its module's
        self._classes = [(value, key.rsplit(".", 1)[0]) for key, _, _, value in found
                         if isinstance(value, type) and key.startswith("synclab")
                         and getattr(value, "__module__", "") == key.rsplit(".", 1)[0]]
        spaces = {name: vars(module) for name, module in self._modules}
        self._tables = [(key, spaces[module], attr) for key in state_before
                        for module, attr in [key.rsplit(".", 1)] if module in spaces]
        self._complete &= len(self._tables) == len(state_before)  # a table's module gone: walked every time

    def changed(self) -> list[str]:
        """``tampered(before, fingerprint()) + tampered(state_before, state_fingerprint())``."""
        if self._unchanged():
            return []
        return tampered(self._before, fingerprint()) + tampered(self._state_before, state_fingerprint())

    def _unchanged(self) -> bool:
        if not self._complete or not all(sys.modules.get(name) is module for name, module in self._modules):
            return False
        if not all(all(map(operator.is_, map(space.get, attrs), values)) for space, attrs, values in self._spaces):
            return False
        if not all(map(operator.is_, map(operator.attrgetter("__code__"), self._functions), self._codes)):
            return False
        if not all(getattr(cls, "__module__", "") == module for cls, module in self._classes):
            return False
        if not all(self._before.get(_marks_key(cls)) == _marks(cls) for cls in _tensor_classes()):
            return False
        return all(isinstance(value := space.get(attr, _GONE), (list, dict, set, tuple, frozenset))
                   and (id(value), _contents(value)) == self._state_before[key] for key, space, attr in self._tables)


def _contents(value: Any) -> tuple:
    """What a container of the package holds, by identity, and each element's fields (a Check's ``run``)."""
    items = [x for pair in value.items() for x in pair] if isinstance(value, dict) else list(value)
    return tuple((id(item), tuple(map(id, vars(item).values())) if hasattr(item, "__dict__") else ())
                 for item in items)


# Public tables the package itself adds to as it runs: an exercise's status once checked, a guard per function
# and the claims of each module imported.
GROWING = {"synclab.checks.EXERCISE_STATUS", "synclab.answer_keys.GUARDED_CODE", "synclab.claims.REGISTRY"}


def state_fingerprint() -> dict[str, tuple]:
    """The package's module-level constants (ALL_CAPS lists, dicts, sets and tuples: the checks' lists, the
    snippets, the tables): each by identity and contents. A class body or a default value that rewrites one
    changes this, as does an answer that does so while its checks run."""
    seen: dict[str, tuple] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "synclab" or name.startswith("synclab.")):
            continue
        for attr, value in list(vars(module).items()):
            key = f"{name}.{attr}"
            if attr.isupper() and not attr.startswith("_") and key not in GROWING \
                    and isinstance(value, (list, dict, set, tuple, frozenset)):
                seen[key] = (id(value), _contents(value))
    return seen


def _is_code(value: Any) -> bool:
    return callable(value) or isinstance(value, (property, classmethod, staticmethod, functools.cached_property)) \
        or hasattr(value, "__get__") and not isinstance(value, (int, float, str, bytes, tuple, list, dict, set))


def tampered(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """What was rebound or removed between the two fingerprints (new names are the checks' own lazy imports)."""
    return [name for name, identity in before.items() if after.get(name) != identity]


_READERS, _THREAD_START, _PACKAGES = 1, 2, 4  # what the tracer looks for in a code's calls (ReferenceTracer._classify)


class ReferenceTracer:
    """Sees every call of a guarded answer's own code that did not come through its guard; keeps its own record of
    which exercises' checks are running, to compare with the guard's; and sees code that runs under one of the
    package's file names without being the package's code."""

    def __init__(self, baseline: tuple[dict[str, tuple], dict[str, tuple]] | None = None) -> None:
        import synclab.answer_keys as answer_keys
        import synclab.checks as checks
        import synclab.dispatch as dispatch
        import synclab.syncs as syncs

        self._keys = answer_keys
        self._codes, self._bypassed_by = answer_keys.GUARDED_CODE, answer_keys.bypassed_by
        # codes by identity: hashing a code object reads all of it, and the tracer asks a million times
        checking = answer_keys.checking
        self._enter, self._exit = id(checking.__enter__.__code__), id(checking.__exit__.__code__)
        self._thread_start = threading.Thread.start.__code__
        self.threads_started: list[str] = []
        # the counting modes' handlers: while one runs a torch function, its own code runs with the modes set aside
        # (a Python-level torch function's body: Tensor.__deepcopy__, torch.tensordot), counted by nothing
        self._handlers = {id(syncs._FunctionLevel.__torch_function__.__code__),
                          id(dispatch._Counting.__torch_function__.__code__)}
        self._guarded: set[int] = set()  # the identities of self._codes
        self._kinds: dict[int, int] = {}  # what each code seen is (_classify)
        self._kept: list[types.CodeType] = []  # the codes of _kinds, alive: no other code takes one's identity
        self.ran_uncounted: list[str] = []  # the reader's code run inside a torch function the counters set aside
        self._running: list[str] = list(answer_keys._RUNNING)  # as the tracer saw them start and end
        self._package = os.path.dirname(os.path.dirname(os.path.abspath(answer_keys.__file__))) + os.sep
        self._genuine: set[types.CodeType] = set()
        self._read: set[str] = set()
        self.bypassed: list[str] = []
        self.guard_state_changed = False
        self.disguised: list[str] = []
        # The fingerprints are taken again as each check starts and as each counting block opens and closes (a
        # generator's resumption is a call), not only after the checks: a patch made and undone between two
        # looks must live inside one counted block, where the counted call's results are checked too.
        self._lookout = Lookout(*baseline) if baseline is not None else None
        self._looks = {id(checks._run_one.__code__): "the start of a check",
                       id(_generator_code(syncs.count_syncs)): "a count_syncs block",
                       id(_generator_code(dispatch.count_torch_calls)): "a count_torch_calls block"}
        self.tampered_during: list[str] = []

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        # Called for every Python call the checks make (a million in 6.1's): what a code object is, is worked out
        # once (keyed by identity, the code kept alive so that its identity is never another's), and most calls
        # (torch's, the standard library's) end at the first line.
        code = frame.f_code
        kind = self._kinds.get(id(code))
        if kind is None:
            kind = self._classify(code)
        if not kind or event != "call":
            return None
        if kind & _READERS and (op := self._handled_op(frame)) is not None:
            # a torch function's own body runs with the counting modes set aside (Tensor.__deepcopy__ calling a
            # memo's methods): the reader's code run from there is counted by nothing
            where = f"{code.co_name} (run inside torch's {op})"
            if where not in self.ran_uncounted:
                self.ran_uncounted.append(where)
        if kind & _THREAD_START and frame.f_back is not None \
                and self._keys.is_readers_code(frame.f_back.f_code.co_filename):
            # syncs are counted per thread: a thread of the reader's own would hide them
            where = f"line {frame.f_back.f_lineno} of {frame.f_back.f_code.co_name}"
            if where not in self.threads_started:
                self.threads_started.append(where)
        if not kind & _PACKAGES:
            return None
        key = id(code)
        if key == self._enter:
            self._running.append(frame.f_locals["self"].task)
        elif key == self._exit and self._running:
            self._running.pop()
        if self._lookout is not None and key in self._looks and not self.tampered_during:
            changed = self._lookout.changed()
            if changed:
                self.tampered_during = [f"{name} (seen at {self._looks[key]})" for name in changed]
        if len(self._codes) != len(self._guarded):  # a guard made since (the table only grows)
            self._guarded = {id(c) for c in self._codes}
        if key in self._guarded:
            guard = self._bypassed_by(frame)
            if guard is not None and guard.name not in self.bypassed:
                self.bypassed.append(guard.name)
            if self._keys._RUNNING != self._running:
                self.guard_state_changed = True
        return None

    def _classify(self, code: types.CodeType) -> int:
        """What the tracer looks for in calls of ``code`` (a sum of the ``_READERS``... flags; 0: nothing)."""
        kind = _READERS if self._keys.is_readers_code(code.co_filename) else 0
        if code is self._thread_start:
            kind |= _THREAD_START
        if code.co_filename.startswith(self._package):
            kind |= _PACKAGES
            if not self._is_genuine(code):
                where = f"{code.co_name} ({os.path.relpath(code.co_filename, self._package)})"
                if where not in self.disguised:
                    self.disguised.append(where)
        self._kinds[id(code)] = kind
        self._kept.append(code)
        return kind

    def _handled_op(self, frame: types.FrameType) -> str | None:
        """The torch function a counting mode's handler is running below ``frame``'s callers, or None."""
        caller = frame.f_back
        for _ in range(64):  # the handler is a few frames up, where the reader's code runs inside one
            if caller is None:
                return None
            if id(caller.f_code) in self._handlers:
                func = caller.f_locals.get("func")
                return getattr(func, "__name__", "") or "a torch function"
            caller = caller.f_back
        return None

    def _is_genuine(self, code: types.CodeType) -> bool:
        """Whether ``code`` is code the package's file holds (compiled from it, so equal to it), read once."""
        if code.co_filename not in self._read:
            self._read.add(code.co_filename)
            try:
                with open(code.co_filename, encoding="utf-8") as source:
                    self._genuine |= set(_all_code(compile(source.read(), code.co_filename, "exec",
                                                                            dont_inherit=True)))
            except (OSError, SyntaxError, ValueError):
                pass
        return code in self._genuine

    def __enter__(self) -> "ReferenceTracer":
        sys.settrace(self)
        threading.settrace(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.still_on = sys.gettrace() is self
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]


def _generator_code(context_manager: Any) -> types.CodeType:
    """The code of the generator behind a ``@contextmanager`` function: what runs as its block opens and closes."""
    return inspect.unwrap(context_manager).__code__


def _check_names(check: str, package: str) -> dict[str, Any]:
    """The names the check call reaches the chapter through (``primer`` in ``primer.check_decode_step(...)``),
    bound to the chapter's package."""
    func = ast.parse(check, mode="eval").body.func  # type: ignore[attr-defined]
    while isinstance(func, ast.Attribute):
        func = func.value
    return {func.id: importlib.import_module(package)} if isinstance(func, ast.Name) else {}


def _all_code(code: types.CodeType) -> list[types.CodeType]:
    """``code`` and every code object nested in it (functions, lambdas, comprehensions, class bodies)."""
    found = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _all_code(const)
    return found


def judge_here(exercise: dict, job: dict, passed: dict[str, bool]) -> dict:
    """Judge one exercise in this (fresh, forked) process; the verdict as a dict."""
    from synclab.checks import CheckReport, attach_observer
    from synclab.lab.witnesses import WitnessRecorder

    task = exercise["task"]
    verdict: dict[str, Any] = {"task": task, "report": None, "review": [], "notes": [], "error": ""}
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    before, state_before = fingerprint(), state_fingerprint()
    used = used_names([c["source"] for c in exercise["cells"]] + [exercise["check"]])
    if exercise.get("judged_apart"):
        return _judge_apart(exercise, job, verdict, used, _failed_before(exercise, passed, verdict))
    for n, source in enumerate(job["setup"], start=1):
        # nbgrader's locked cells or the lab as generated run whole; the notebook's own, definitions only;
        # a line that raised is said only to the exercises that read what it would have bound
        verdict["notes"] += [note for note, bound in run_setup(source, f"<setup cell {n}>", namespace)
                             if bound & used]
    failed = _failed_before(exercise, passed, verdict)
    for name, target in exercise["stand_in"] if failed else ():  # judged on the package's version of it
        module, attr = target.split(":")
        namespace[name] = getattr(importlib.import_module(module), attr)
    cells = [c for c in exercise["cells"] if not set(c["answers"]) & set(failed)]
    roots, readable = tuple(job["course_roots"]), tuple(job["readable"])
    refused = arm(roots, readable)
    seed = os.environ.get(SEED_ENV, "")
    recorder = WitnessRecorder(int(seed) if seed.isdigit() else None, ChildAudit(roots, readable, refused))
    attach_observer(recorder)
    error = load_cells(namespace, cells, task, verdict["notes"])
    missing = [name for name in exercise["defines"] if name not in namespace]
    if error or missing:
        verdict["error"] = error or f"the notebook defines no {', '.join(missing)}"
    changed = tampered(before, fingerprint()) + tampered(state_before, state_fingerprint())
    for name, module in _check_names(exercise["check"], job["imports"][0]).items():
        if name in namespace and namespace[name] is not module:  # `class primer: ...` in an answer cell
            verdict["review"].append(f"rebinds {name}, which the check call uses (the check used the chapter's)")
        namespace[name] = module  # the check call reaches the chapter's own checks, whatever the cells did
    if changed and not verdict["error"]:  # checks run on machinery the cells rebound would report what it says
        verdict["error"] = "the cells changed the checks' machinery before they ran, so they were not run"
    if not verdict["error"]:
        report: Any = None
        try:
            with ReferenceTracer((before, state_before)) as tracer:
                report = eval(compile(exercise["check"], f"<check {task}>", "eval"), namespace)
        except BaseException as exc:  # the machinery itself broke: tampering is the likely cause, looked for below
            verdict["error"] = f"the checks broke: {type(exc).__name__}: {exc}"
        changed = tracer.tampered_during or tampered(before, fingerprint()) + tampered(state_before,
                                                                                        state_fingerprint())
        timed_out = isinstance(report, CheckReport) and any(o.status == "timed out" for o in report.outcomes)
        review = verdict["review"]
        if not tracer.still_on and not timed_out:  # a check's time limit interrupts the tracer itself
            review.append("the grader's tracer (sys.settrace) was off when its checks ended")
        review += [f"called {name} around its guard (the package's answer)" for name in tracer.bypassed]
        review += [f"started a thread while its checks ran ({where}): the checks count syncs per thread"
                   for where in tracer.threads_started]
        if tracer.guard_state_changed:
            review.append("changed the answer guard's record of which checks are running")
        review += [f"ran code disguised as the package's: {where}" for where in tracer.disguised]
        review += [f"ran its own code where the counters do not look: {where}" for where in tracer.ran_uncounted]
        if isinstance(report, CheckReport):
            verdict["report"] = report.to_dict()
            verdict["witnesses"] = recorder.witnesses(report)
            # the checks refused it already (each such check failed, its message says why): said once more here
            review += [f"called or handed in {name} (the package's answer)"
                       for name in dict.fromkeys(o.refused for o in report.outcomes if o.refused)]
        elif not verdict["error"]:
            verdict["error"] = f"the check returned {type(report).__name__}, not a report"
    verdict["review"] += [f"the grader's sandbox {'refused' if enforced(why) else 'saw'} {why}"
                          for why in dict.fromkeys(refused)]
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        verdict["review"].insert(0, f"rebound or changed the grader's machinery or tables: {shown}")
    return verdict


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


def _judge_apart(exercise: dict, job: dict, verdict: dict[str, Any], used: set[str], failed: list[str]) -> dict:
    """Judge one exercise whose answer runs in a process of its own (:mod:`synclab.lab.judged_apart`): this process
    runs the checks and none of the reader's code. Where an exercise it builds on failed (``failed``), the answer's
    process is sent the package's version of it in place of the reader's cells that define it: a 1.2 whose 1.1 is
    wrong runs on the package's 1.1, which that answer then holds (1.1's points are lost already)."""
    from synclab.checks import CheckReport, attach_observer
    from synclab.lab import judged_apart
    from synclab.lab.witnesses import WitnessRecorder

    task = exercise["task"]
    if failed:
        exercise = {**exercise, "cells": [c for c in exercise["cells"] if not set(c["answers"]) & set(failed)],
                    "stand_ins": _stand_in_sources(exercise)}
    # no seed of the grader's; the install without the answers judged apart, in the grading install's place
    env = judged_apart.answer_environment(dict(os.environ), job["grading_install"], job["answer_install"],
                                          drop=(SEED_ENV,))
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
