"""The grader's audit hook (PEP 578): the sandbox's refusals, and a record of what the reader's code did.

Used by the grader's worker (:mod:`synclab.lab.judge_worker`) in each exercise's own process, armed after the
trusted setup and before the reader's cells run. ``sys.addaudithook`` cannot be undone.

An event is considered when the reader's code is its origin (a frame compiled from an answer cell,
``<Exercise N.M, cell K>`` or ``<your cell K>``, met before any import's own frame). Two kinds:

* **refused**, as a sandbox's permissions would refuse them: reading or writing the course's files (solutions,
  tests, anything in the repository but the package and its data; nbgrader's course folder), ``/proc``, an inherited
  file descriptor, and starting a process (``os.fork``, ``os.system``, ``subprocess``...), which would read them out
  of the hook's sight. The event raises :class:`Refused` where it happened, as a ``PermissionError`` would;
* **recorded** only: frames, tracing hooks, ``gc``'s walks, ``ctypes``, ``compile``/``exec``, setting the package's
  attributes, unpickling, the environment, writing other files. They change nothing the code does.

Both go to the verdict's review lines, for an instructor to read; neither changes a score. Until the answer runs
apart from everything the checks keep (the instructors' page says what that means for a grade), a record is all a
hook in the same process can give: code that runs there can reach whatever the process holds.

The processes the checks start for themselves (chapter 3's ranks) arm the same hook before they run any of the
reader's code, and report what it saw there: :class:`ChildAudit`, handed to them through the checks' observer
(:meth:`synclab.checks.CheckObserver.for_child`).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable


READER_FILES = ("<Exercise ", "<your cell ")  # how the worker names the code it compiles from answer cells

# What every lab says before its first exercise (the lab generator adds it): the rules below, in the reader's words.
ANSWER_RULES = """**How your answers are graded.** Your answer cells run whole, in this notebook and in the grader
alike: imports, constants, helpers, prints, whatever your code needs (an answer may call an earlier answer of
yours). The checks judge what your code does, never how it is written. In the grader your cells run in a process of their own, with the lab's setup, where they cannot read
the course's files (solutions, tests) or start processes; the checks run in the grader's process, send your code each
case as data, and compare what comes back.
`python -m synclab check <this lab> --task N.M` runs the same check cells as this notebook, from a terminal."""


class Refused(PermissionError):
    """An event the grader's audit hook refuses (the message names it)."""


# Events refused whenever the reader is on the stack, whoever called them.
_ALWAYS = ("ctypes.", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.addaudithook",
           "sys._current_frames", "sys.settrace", "sys.setprofile", "code.__new__", "function.__new__",
           "marshal.loads", "marshal.load", "os.kill", "os.killpg", "os.putenv", "os.unsetenv",
           "signal.pthread_kill", "socket.")
_PROCESSES = ("os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system", "subprocess.Popen",
              "pty.spawn")
_FRAME_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}  # how a frame is reached without _getframe
_CODE_ATTRIBUTES = {"__code__", "__defaults__", "__kwdefaults__", "__globals__", "__closure__"}
# The simulated device (synclab.sim.cuda.names_bound_before) rebinds the code of torch's CUDA names while a block runs,
# and back: a chapter 6 run the reader's row starts does it, as the lab's own engine; never a review line.
_SIMULATION = ("synclab.sim",)
# Callers that take a frame for their own bookkeeping and hand none back.
_FRAME_USERS = ("warnings", "collections", "typing", "enum", "abc", "dataclasses", "functools", "logging",
                "threading", "torch", "synclab",  # the package names lines and phases; it returns no frame
                "traceback")  # torch's lazy CUDA calls format the stack that queued them (an engine run of a cell)
# Callers that start processes for the checks themselves (chapter 3's ranks).
_PROCESS_STARTERS = ("multiprocessing", "torch.multiprocessing", "concurrent.futures", "subprocess")
# Modules whose job is to run the source they are handed: code the reader did not hand in, however it arrives.
_SOURCE_RUNNERS = ("timeit", "runpy", "code", "codeop", "doctest", "pdb", "bdb", "cProfile", "profile", "trace",
                   "typing", "pickle", "shelve")
# Imports read, compile and run their modules' code: that is the package's and the libraries' own code.
_IMPORTERS = ("importlib", "zipimport", "pkgutil")
_PICKLE_MODULES = ("torch", "numpy", "collections", "copyreg", "_codecs")
_PICKLE_BUILTINS = {"set", "frozenset", "list", "dict", "tuple", "slice", "range", "complex", "bytearray", "bytes",
                    "int", "float", "bool", "str", "object"}
_WATCHED = ("ctypes.", "gc.", "sys.", "code.", "function.", "object.", "marshal.", "os.", "signal.", "socket.",
            "subprocess.", "pty.", "compile", "exec", "open", "pickle.")


def _module(frame: Any) -> str:
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _reader_on_stack(frame: Any) -> bool:
    """Whether the reader's code is the origin of this event: a reader's frame met before any import's own frame
    (a module that a cell imports runs its own code, the package's or a library's, not the reader's)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(READER_FILES):
            return True
        if _in(_module(frame), _IMPORTERS):
            return False
        frame = frame.f_back
    return False


def _package_between(frame: Any) -> bool:
    """Whether the package's code stands between this event and the reader's code that led to it: what it does, it
    does on its own account (a cell that asks for chapter 6's counts has them cached on disk)."""
    while frame is not None and not frame.f_code.co_filename.startswith(READER_FILES):
        if _in(_module(frame), ("synclab",)):
            return True
        frame = frame.f_back
    return False


class _Policy:
    """What the hook decides, given where the course's files are."""

    def __init__(self, course_roots: tuple[str, ...], readable: tuple[str, ...]) -> None:
        self.course_roots = tuple(os.path.realpath(p) + os.sep for p in course_roots)
        self.readable = tuple(os.path.realpath(p) + os.sep for p in readable)

    def refuses(self, event: str, args: tuple, caller: Any) -> str | None:
        """Why ``event`` is refused (a phrase), or None; ``caller`` is the frame that raised it."""
        module = _module(caller)
        if event.startswith(_PROCESSES):
            if not _in(module, _PROCESS_STARTERS) or _reader_on_stack(caller):
                return f"{event}: a process of its own"
            return None
        if event == "sys._getframe" or event == "object.__getattr__" and len(args) > 1 and \
                args[1] in _FRAME_ATTRIBUTES:
            # the package and the libraries take frames all the time (the simulated device, on every torch call):
            # settle those by the caller's module before walking the stack
            if not _in(module, _FRAME_USERS) and _reader_on_stack(caller):
                what = args[1] if event == "object.__getattr__" else "sys._getframe"
                return f"{what}: a frame of the running program"
            return None
        if event == "object.__getattr__":
            return None
        if not _reader_on_stack(caller):
            return None
        if event in ("compile", "exec"):
            own = caller.f_code.co_filename.startswith(READER_FILES)
            if own or _in(module, _SOURCE_RUNNERS):
                return f"{event}: code it did not hand in"
            return None
        if event == "open":
            why = self._open(args)
            if why is not None and why.startswith("open: writing ") and not why.startswith(_ENFORCED) \
                    and _package_between(caller):
                return None  # the package's own file (chapter 6's counts, cached on disk), asked for by a cell
            return why
        if event == "pickle.find_class":
            where, name = args[0], args[1]
            if _in(where, _PICKLE_MODULES) or where == "builtins" and name in _PICKLE_BUILTINS:
                return None
            return f"pickle.find_class: {where}.{name}"
        if event in ("marshal.loads", "marshal.load") and _in(module, _IMPORTERS):
            return None  # an import reading its cached bytecode
        if event in ("object.__setattr__", "object.__delattr__") and len(args) > 1:
            target, attr = args[0], args[1]
            owner = str(getattr(target, "__module__", "") or "")
            own = caller.f_code.co_filename.startswith(READER_FILES)
            if _in(module, _SIMULATION):  # the simulated device binds torch's names for a block: its own doing
                return None
            if attr in _CODE_ATTRIBUTES or own and (owner == "synclab" or owner.startswith("synclab.")):
                return f"{event}: {attr} of {getattr(target, '__qualname__', type(target).__name__)}"
            # a dataclass naming its methods, functools.wraps, a module of the package imported from a cell
            return None
        if event.startswith(_ALWAYS):
            return event
        return None

    def _open(self, args: tuple) -> str | None:
        """``open``'s event carries (path, mode, flags): ``open()`` a mode, ``os.open`` flags."""
        path = args[0]
        mode = args[1] if len(args) > 1 else None
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        if isinstance(path, int):
            return "open: a file descriptor" if path > 2 else None
        writes = isinstance(mode, str) and any(c in mode for c in "wax+") or \
            flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC)
        real = os.path.realpath(os.fsdecode(path))
        if writes:
            inside = any(real.startswith(root) for root in self.course_roots)
            return f"open: writing the course's file {path}" if inside else f"open: writing {path}"
        if real.startswith("/proc" + os.sep) or real == "/proc":
            return f"open: /proc ({path})"
        for root in self.course_roots:
            if real.startswith(root) and not real.startswith(self.readable):
                return f"open: the course's file {os.path.relpath(real, root)}"
        return None


# What the hook refuses outright, as a sandbox's permissions would: the course's files (solutions, tests, the grader's
# cache), /proc, and processes (which would read them out of the hook's sight). Everything else it sees is only
# recorded, for the instructor's review lines: it never changes what the answer does, nor its score.
_ENFORCED = ("open: the course's file", "open: writing the course's file", "open: /proc", "open: a file descriptor")


def enforced(why: str) -> bool:
    """Whether the hook refuses what ``why`` names (else it only records it)."""
    return why.startswith(_ENFORCED) or ": a process of its own" in why


def arm(course_roots: tuple[str, ...], readable: tuple[str, ...]) -> list[str]:
    """Add the hook to this process, for good; the list it records each refused event in.

    ``course_roots`` are the folders of the course (the repository the grader runs from, nbgrader's course
    folder); ``readable`` the folders under them an answer may read (the package and its data, the Python
    install). Call it after the trusted setup has run, before the reader's code loads.
    """
    policy = _Policy(course_roots, readable)
    refused: list[str] = []
    busy = [False]  # the hook's own frame walk raises events too

    def hook(event: str, args: tuple) -> None:
        if busy[0] or not event.startswith(_WATCHED):
            return
        if event == "object.__getattr__" and (len(args) < 2 or args[1] not in _FRAME_ATTRIBUTES):
            return  # reading a function's __code__, which the package's guards do on every call: nothing to decide
        busy[0] = True
        try:
            why = policy.refuses(event, args, sys._getframe(1))
        finally:
            busy[0] = False
        if why is not None:
            refused.append(why)
            if enforced(why):  # the sandbox's: the course's files and processes that would read them
                raise Refused(f"the grader's sandbox refuses {why}")

    sys.addaudithook(hook)
    return refused


def _arm_in_child(course_roots: tuple[str, ...], readable: tuple[str, ...]) -> Callable[[], list[str]]:
    """In a process the checks started: arm the hook; what tells what it recorded since it was last asked."""
    refused = arm(course_roots, readable)
    told = [0]

    def news() -> list[str]:
        new = refused[told[0]:]
        told[0] += len(new)
        return list(new)

    return news


class ChildAudit:
    """The audit's part in the processes the checks start: arm the same hook there, and add what it records to this
    process's record (``refused``, from :func:`arm`)."""

    def __init__(self, course_roots: tuple[str, ...], readable: tuple[str, ...], refused: list[str]) -> None:
        self._roots, self._readable, self._refused = course_roots, readable, refused

    def for_child(self) -> Callable[[], Callable[[], list[str]]]:
        return functools.partial(_arm_in_child, self._roots, self._readable)

    def child_saw(self, lines: list[str]) -> None:
        self._refused.extend(lines)


class ChildrenAudited:
    """An answer's process's one observer of the checks' kind (:class:`synclab.checks.CheckObserver`): no checks run
    there, but a runner may start processes (3.7's ranks), and those run under the same hook, what it records there
    joining this process's record (:class:`ChildAudit`). It keeps nothing else."""

    def __init__(self, audit: ChildAudit) -> None:
        self._audit = audit

    def seed(self) -> int | None:
        return None

    def check_started(self, check: Any) -> None:
        pass

    def found_right(self, value: Any, exact_tensor: bool) -> None:
        pass

    def check_ended(self, check: Any, outcome: Any) -> None:
        pass

    def for_child(self) -> Callable[[], Callable[[], list[str]]]:
        return self._audit.for_child()

    def child_saw(self, lines: list[str]) -> None:
        self._audit.child_saw(lines)
