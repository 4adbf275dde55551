"""The checks keep their answers: a reference the checks compare against refuses a call from the reader's code.

Used by every chapter's ``checks`` room (introduced with chapter 0's checks). A check needs
answers to compare with: a plain reference implementation, a measurer of the syncs a reader
predicts, an answer key of labels. Those live in the package the reader imports, so a reader
could pass an exercise by calling them. :func:`answer_key` marks such a function (or every
method of such a class) with the exercise it answers; a marked function then refuses a call
whose caller is not the package's own code (nor its test suite):

* while Exercise ``N.M``'s checks run, and outside any check (a cell that stores an answer
  to return it later), its answers refuse the reader's code;
* while *another* exercise's checks run, they serve as collaborators (Exercise 5.2 is handed
  a reference ``PlaceholderRange``), so the reader's code may call them;
* ``scope="checks"`` (vLLM's code before a PR, which a reader may well run to explore) refuses
  only while that exercise's checks run. The guard stays in place all the time, so a method taken
  before the checks (``base = AllPoolBaseline.forward``) still refuses during them; outside a check
  run it costs one test. A profile that calls a guarded method many times per timed call times
  :func:`as_written` instead.

The caller that decides is the first frame outside the standard library's wrappers, this module,
and vLLM's code in ``synclab/engine/``: ``AllPoolBaseline(...)(h, m)`` reaches ``forward`` through
the base class's ``__call__``, and it is the reader's cell that asked.

A refusal raises :class:`AnswerKeyRefused` and is also recorded, so a reader's ``except
Exception`` cannot hide it: :func:`synclab.checks.run_checks` fails the check with a message
that names the function. Handing the answer itself to a check (``check_x(ch0.some_reference)``,
a ``functools.partial`` of it, a subclass of a reference class) is caught by :func:`answer_in`.

Beside the guards: :mod:`.plain_data` (values as data, for what crosses between processes), :mod:`.stored` (the
answers of the public cases, where a students' install does not ship the answers) and :mod:`.runners` (how a check
reaches an answer that may live in another process).
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, Iterator, TypeVar

T = TypeVar("T")

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../synclab
_TESTS = os.path.join(os.path.dirname(_PACKAGE), "tests")  # the package's own test suite
_PASS_THROUGH = (os.path.dirname(functools.__file__) + os.sep,  # stdlib wrappers (functools, contextlib)
                 os.path.abspath(__file__),  # the guards themselves
                 os.path.join(_PACKAGE, "engine") + os.sep)  # vLLM's code a call passes through (a base __call__)


@dataclass(frozen=True)
class Key:
    """What a marked function answers: its exercises, its name as the reader would call it, its role."""

    tasks: tuple[str, ...]
    name: str
    role: str  # "reference", "answer key", "prediction measurer", "vLLM's code before #41163", ...
    scope: str  # "always": refuses outside the checks too; "checks": only while its exercise's checks run

    def message(self, handed: bool = False) -> str:
        which = " and ".join(f"Exercise {t}" for t in self.tasks)
        how = "the checks were handed (or your class inherits)" if handed else "you called"
        return f"{how} {self.name}, the package's {self.role} for {which}: it cannot stand in for your code"

    def hint(self) -> str:
        return f"write Exercise {self.tasks[0]} yourself, in the cell that holds its stub"


class AnswerKeyRefused(Exception):
    """Raised when the reader's code calls one of the package's answers (see the module docstring)."""

    def __init__(self, key: Key) -> None:
        super().__init__(key.message())
        self.key = key


# The tasks whose checks are running (a stack: a check may run another exercise's checks), and what
# the reader's code tried to call meanwhile. Plain module state, not a ContextVar: a reader's code
# may call from a thread it started.
_RUNNING: list[str] = []
_REFUSED: list[Key] = []


def running_task() -> str | None:
    return _RUNNING[-1] if _RUNNING else None


def _is_trusted(filename: str) -> bool:
    return filename.startswith((_PACKAGE + os.sep, _TESTS + os.sep))


def _caller(frame: FrameType | None) -> FrameType | None:
    """The frame that asked: past the standard library's wrappers, the guards and vLLM's code (see above)."""
    while frame is not None and frame.f_code.co_filename.startswith(_PASS_THROUGH):
        frame = frame.f_back
    return frame


def _is_checks_code(filename: str) -> bool:
    """A chapter's checks (``synclab/<chapter>/checks.py`` or ``.../checks/``): the code that compares the reader's
    work with the answers, not a helper that calls whatever it is handed (timing, profiling, the engine)."""
    parts = os.path.relpath(filename, _PACKAGE).split(os.sep)
    return not parts[0].startswith("..") and len(parts) >= 2 and parts[1] in ("checks.py", "checks")


_LIBRARY = (os.path.dirname(os.__file__) + os.sep, f"{os.sep}site-packages{os.sep}", "<frozen ", "<string>")
_RUN_CHECKS = (os.path.join(_PACKAGE, "checks.py"), "run_checks")  # where an exercise's checks begin


def is_readers_code(filename: str) -> bool:
    """Whether code from ``filename`` is the reader's: neither the package (nor its tests) nor a library."""
    return not (_is_trusted(filename) or any(part in filename for part in _LIBRARY))


def _reader_on_the_way(frame: FrameType | None) -> bool:
    """Whether the reader's code stands between ``frame`` and the checks that are running: a cell's code handed
    the answer to a helper (a timer, a counter) that called it on the cell's behalf."""
    while frame is not None:
        code = frame.f_code
        if (code.co_filename, code.co_name) == _RUN_CHECKS:
            return False
        if is_readers_code(code.co_filename):
            return True
        frame = frame.f_back
    return False


def _refuses(key: Key, caller: FrameType | None, start: FrameType | None = None) -> bool:
    """Whether ``caller`` may not call ``key``'s answer now (``start``: the frame that called, helpers included).
    No caller at all (a thread that reached it through the standard library alone) is the reader's as much as a
    cell is."""
    filename = caller.f_code.co_filename if caller is not None else ""
    task = running_task()
    if task is None:
        return key.scope == "always" and not _is_trusted(filename)
    if task not in key.tasks:
        return False  # another exercise's checks run: its answers are collaborators (5.2 is handed a 5.1)
    # its own exercise's checks run: only the checks themselves (and the package's tests) compare with it, and
    # not on behalf of the reader's code
    if _reader_on_the_way(start if start is not None else caller):
        return True
    return not (_is_checks_code(filename) or filename.startswith(_TESTS + os.sep))


def _guard(function: Callable[..., T], key: Key) -> Callable[..., T]:
    checks_only = key.scope == "checks"

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> T:
        if (_RUNNING or not checks_only) and _refuses(key, _caller(sys._getframe(1)), sys._getframe(1)):
            _REFUSED.append(key)
            raise AnswerKeyRefused(key)
        if _RUNNING and running_task() in key.tasks and args and _borrowed(function, args[0]):
            _REFUSED.append(key)  # an answer's method on the reader's object: partial(Ref.method, self)
            raise AnswerKeyRefused(key)
        return function(*args, **kwargs)

    guarded.__answer_key__ = key  # type: ignore[attr-defined]
    # No __wrapped__: inspect.unwrap and a reader's curiosity would hand out the answer unguarded. The raw
    # function stays reachable all the same (its closure holds it): the grader keeps the answers judged apart out of
    # an answer's process altogether (synclab.lab.student_image.write_answer_install).
    del guarded.__wrapped__  # type: ignore[attr-defined]
    _RAW[guarded] = function
    return guarded


_OWNERS: dict[Any, type | None] = {}


def _borrowed(function: Callable[..., Any], receiver: Any) -> bool:
    """Whether a marked method runs on an object of another class than its own (a reader's object lent the
    answer's method, which the checks then call without any of the reader's code on the stack)."""
    if function not in _OWNERS:
        owner: type | None = None
        if "." in function.__qualname__ and "<locals>" not in function.__qualname__:
            try:
                found, attr = _owner_of(function)
                if isinstance(found, type) and not isinstance(vars(found).get(attr), (staticmethod, classmethod)):
                    owner = found
            except (AttributeError, KeyError):
                owner = None
        _OWNERS[function] = owner
    owner = _OWNERS[function]
    return owner is not None and not isinstance(receiver, owner)


# Every marked function's guard, and the function as written (the stored answers are recorded from it).
_RAW: dict[Callable[..., Any], Callable[..., Any]] = {}


def unguarded(function: Callable[..., T]) -> Callable[..., T]:
    """The marked ``function`` as written (for the package's tests: a copy a reader pasted runs this code)."""
    return _RAW.get(function, function)


# Methods of the code before a PR (``scope="checks"``), as written: what :func:`as_written` puts back.
_PLAIN: list[Callable[..., Any]] = []


def _owner_of(function: Callable[..., Any]) -> tuple[Any, str]:
    owner: Any = sys.modules[function.__module__]
    *path, attr = function.__qualname__.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, attr


def _resolved(cls: type, attr: str) -> Any:
    """What ``cls.attr`` finds along the MRO, unbound (None if nothing)."""
    return next((vars(klass)[attr] for klass in cls.__mro__ if attr in vars(klass)), None)


def as_written(cls: type) -> type:
    """``cls`` with the guarded methods it has (its own or inherited) as written: what a profile times when a
    guard's cost would show (a guard costs a tenth of a microsecond a call)."""
    plain: dict[str, Any] = {}
    for function in _PLAIN:
        owner, attr = _owner_of(function)
        current = vars(owner).get(attr)
        if owner in cls.__mro__ and _resolved(cls, attr) is current:
            plain[attr] = (functools.cached_property(function) if isinstance(current, functools.cached_property)
                           else function)
    if not plain:
        return cls
    twin = type(cls.__name__, (cls,), {**plain, "__module__": cls.__module__, "__qualname__": cls.__qualname__})
    for attr, value in plain.items():
        if isinstance(value, functools.cached_property):
            value.__set_name__(twin, attr)
    return twin


def answer_key(*tasks: str, role: str = "reference", scope: str = "always", name: str = "") -> Callable[[T], T]:
    """Mark a function, or every method a class defines, as the package's answer for ``tasks``.

    ``name`` is how the reader would reach it (``"primer.decode_step_baseline"``); by default the
    function's module and qualified name.
    """
    if scope not in ("always", "checks"):
        raise ValueError(f"scope must be 'always' or 'checks', not {scope!r}")

    def mark(obj: T) -> T:
        label = name or f"{obj.__module__}.{obj.__qualname__}"  # type: ignore[attr-defined]
        if isinstance(obj, type):
            for attr, value in list(vars(obj).items()):
                member = Key(tasks, f"{label}.{attr}", role, scope)
                if isinstance(value, (staticmethod, classmethod)):
                    setattr(obj, attr, type(value)(_guard(value.__func__, member)))
                elif isinstance(value, functools.cached_property):
                    guarded = functools.cached_property(_guard(value.func, member))
                    guarded.__set_name__(obj, attr)
                    setattr(obj, attr, guarded)
                elif isinstance(value, property):
                    setattr(obj, attr, property(*(f and _guard(f, member) for f in (value.fget, value.fset, value.fdel))))
                elif callable(value) and (attr in ("__init__", "__call__") or not attr.startswith("__")):
                    setattr(obj, attr, _guard(value, member))
            obj.__answer_key__ = Key(tasks, label, role, scope)  # type: ignore[attr-defined]
            return obj
        key = Key(tasks, label, role, scope)
        if scope == "checks" and "." in obj.__qualname__:  # a method: as_written can put it back
            _PLAIN.append(obj)  # type: ignore[arg-type]
        return _guard(obj, key)  # type: ignore[arg-type, return-value]

    return mark


def _unwrapped(impl: Any) -> Iterator[Any]:
    """``impl`` and what it wraps: a partial's function, a bound method's function, ``__wrapped__``."""
    seen: set[int] = set()
    todo = [impl]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        for attr in ("func", "__func__", "__wrapped__"):
            inner = getattr(obj, attr, None)
            if inner is not None:
                todo.append(inner)


def _effective_members(cls: type) -> Iterator[Any]:
    """What ``cls`` really has under each name: its own attribute, else the nearest base's."""
    for attr in dir(cls):
        for klass in cls.__mro__:
            if attr in vars(klass):
                value = vars(klass)[attr]
                yield from (value, getattr(value, "func", None), getattr(value, "fget", None),
                            getattr(value, "__func__", None))
                break


def answer_in(impl: Any, task: str) -> Key | None:
    """The answer for ``task`` that ``impl`` is, wraps, or inherits without overriding (a class), if any."""
    for obj in _unwrapped(impl):
        # a class, or an instance: what its class has (__call__ = staticmethod(answer)) and what it holds
        candidates = [obj, *_effective_members(obj)] if isinstance(obj, type) else \
            [obj, *_effective_members(type(obj)), *getattr(obj, "__dict__", {}).values()]
        for candidate in candidates:
            key = getattr(candidate, "__answer_key__", None)
            if isinstance(key, Key) and task in key.tasks:
                return key
    return None


def refuse(key: Key) -> AnswerKeyRefused:
    """Record a refusal found by a check itself (a class the reader's factory returned, a refusal on one of
    chapter 3's ranks) as if the call had been refused here; raise what it returns."""
    _REFUSED.append(key)
    return AnswerKeyRefused(key)


class checking:
    """``with checking("0.1"):``: Exercise 0.1's checks run; yields the refusals seen meanwhile."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.refused: list[Key] = []

    def __enter__(self) -> "checking":
        if self.task in _RUNNING:  # the reader's code asked the checks about itself (an oracle, and a timer reset)
            raise refuse(Key((self.task,), f"the checks of Exercise {self.task}", "checks", "checks"))
        _RUNNING.append(self.task)
        self._mark = len(_REFUSED)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.refused = _REFUSED[self._mark:]
        del _REFUSED[self._mark:]
        _RUNNING.pop()
