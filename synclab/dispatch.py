"""Count the host's work: the calls that go through torch, and the list elements Python code touches.

Taught in chapter 5 (list-based caches). Reading one integer out of a tensor,
``int(cumsum[-1])``, is two torch calls (``__getitem__`` builds a 0-d tensor,
``__int__`` reads it out) and a deallocation. Each crosses from Python into C++,
through argument parsing, the dispatcher and boxing: about a microsecond on a
fast host, against tens of nanoseconds for indexing a Python list. On the hot
path of a scheduler that asks thousands of such questions per step, that is
the difference.

:func:`count_torch_calls` counts them with a ``TorchFunctionMode``: a count, the
same on every machine, so tests can assert it where they must not assert time.
:class:`CountingList` counts the elements of a list of tokens that code reads (chapter 4's
reverse scan against ``list.index``; chapter 6's output histories); :func:`plain_list` copies one out as a single
counted read.
"""

from __future__ import annotations

import _collections_abc
import linecache
import os
import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from collections.abc import MutableSequence
from types import FrameType
from typing import Any, Callable, Iterable, Iterator

from torch.overrides import TorchFunctionMode

from synclab.device import called_from_device_layer
from synclab.syncs import attribute_syncs_to_callers, location

attribute_syncs_to_callers(__file__)  # a sync inside a counted call belongs to the line that made the call


@dataclass
class TorchCalls:
    """The torch calls made inside a ``count_torch_calls()`` block, by name."""

    by_name: Counter = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.by_name.values())

    def __str__(self) -> str:
        if not self.by_name:
            return "0 torch calls"
        names = ", ".join(f"{name} x{n}" for name, n in self.by_name.most_common(6))
        return f"{self.count} torch call(s): {names}"


class _Counting(TorchFunctionMode):
    def __init__(self, calls: TorchCalls) -> None:
        super().__init__()
        self.calls = calls

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None):
        if not called_from_device_layer(sys._getframe(1)):  # the simulated device's own calls are not the host's work
            self.calls.by_name[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def count_torch_calls() -> Iterator[TorchCalls]:
    """Count torch functions and tensor methods called in the block (``t[i]``, ``int(t)``, ``t.tolist()``, ...)."""
    calls = TorchCalls()
    with _Counting(calls):
        yield calls


_LIST_MACHINERY = (__file__, _collections_abc.__file__)  # this module's counted methods, and MutableSequence's mixins
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # the lab's own code: the engine's reads


def _reader_frame() -> FrameType | None:
    """The frame that read a counted list, past the list's own methods."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in _LIST_MACHINERY:
        frame = frame.f_back
    return frame


def _line_of(frame: FrameType | None) -> str:
    """A frame's line as a message quotes it (``Cell In[7]:31 `for t in history:```)."""
    if frame is None:
        return "?"
    code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return location(frame.f_code.co_filename, frame.f_lineno, code if len(code) <= 90 else code[:87] + "...")


class CountingList(MutableSequence):
    """A list of tokens that counts the elements Python code reads (``touched``), and by which operation (``by_op``).

    Not a ``list`` subclass, so there is no way around the count: ``list``'s own C methods (``list.copy(x)``,
    ``list.__getitem__(x, i)``) refuse it rather than read it uncounted, and ``==``, ``repr`` and iteration go
    through its counted methods. Chapter 4's checks hand one to every call of the answer, so that no call can tell
    it is the counted one; chapter 6 counts its output histories with it. The items sit in a name-mangled slot (the
    grader's reading of an answer flags a name-mangled attribute reached from outside).
    """

    __slots__ = ("__items",)
    __hash__ = None  # type: ignore[assignment]  # mutable, as a list
    touched = 0
    by_op: Counter[str] = Counter()
    first_at: dict[str, str] = {}  # op -> the first line outside the lab's package that read that way, else the first

    @staticmethod
    def reset() -> None:
        """A new count: no element touched, no operation, no line."""
        CountingList.touched = 0
        CountingList.by_op.clear()
        CountingList.first_at.clear()

    @staticmethod
    def _note(op: str) -> None:
        """Where ``op`` read: once per call of a method (a frame walk, never one per element), until a line outside
        the lab's package (the reader's) has read that way."""
        seen = CountingList.first_at.get(op)
        if seen is not None and not seen.startswith("synclab/"):
            return
        frame = _reader_frame()
        in_package = frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR)
        if seen is None or not in_package:  # the engine's reads again: no line to format, the first one stays
            CountingList.first_at[op] = _line_of(frame)

    @staticmethod
    def _count(op: str, n: int) -> None:
        CountingList.touched += n
        CountingList.by_op[op] += n

    @staticmethod
    def _add(op: str, n: int) -> None:
        CountingList._note(op)
        CountingList._count(op, n)

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self.__items = plain_list(items)

    def __len__(self) -> int:  # the length is the list's header: no element read
        return len(self.__items)

    def __getitem__(self, key: Any) -> Any:
        item = self.__items[key]
        if isinstance(key, slice):
            CountingList._add("slicing (x[a:b] copies the slice)", len(item))
        else:
            CountingList._add("reading items one by one (x[i])", 1)
        return item

    def __setitem__(self, key: Any, value: Any) -> None:
        self.__items[key] = value

    def __delitem__(self, key: Any) -> None:
        del self.__items[key]

    def insert(self, index: int, value: Any) -> None:
        self.__items.insert(index, value)

    def __iter__(self) -> Iterator[Any]:
        op = "iterating over the list from the start"
        CountingList._note(op)
        for item in self.__items:
            CountingList._count(op, 1)
            yield item

    def __reversed__(self) -> Iterator[Any]:
        op = "iterating backwards (reversed(x))"
        CountingList._note(op)
        for item in reversed(self.__items):
            CountingList._count(op, 1)
            yield item

    def __contains__(self, value: Any) -> bool:
        CountingList._add(f"`{value!r} in x` (reads every element)", len(self.__items))
        return value in self.__items

    def index(self, value: Any, start: int = 0, stop: int = sys.maxsize) -> int:
        position = self.__items.index(value, start, stop)
        CountingList._add(f"list.index({value!r}) (scans from the start)", position + 1 - start)
        return position

    def count(self, value: Any) -> int:
        CountingList._add(f"list.count({value!r}) (reads every element)", len(self.__items))
        return self.__items.count(value)

    def reverse(self) -> None:  # MutableSequence's would swap by x[i]: named for what it is
        CountingList._add("x.reverse() (moves every element)", len(self.__items))
        self.__items.reverse()

    def clear(self) -> None:  # drops the elements without reading them, as a list's does
        self.__items.clear()

    def copy(self) -> list:
        CountingList._add("x.copy() (copies the whole list)", len(self.__items))
        return list(self.__items)

    def __add__(self, other: Any) -> list:
        CountingList._add("x + y (builds a new list of every element)", len(self.__items) + len(other))
        return self.__items + list(other)

    def __eq__(self, other: object) -> bool:
        CountingList._add("x == y (reads every element)", len(self.__items))
        return self.__items == (other.__items if isinstance(other, CountingList) else other)

    def __reduce_ex__(self, protocol: Any) -> tuple:  # copy.copy, copy.deepcopy and pickle all come here
        CountingList._add("copying it (copy.copy, copy.deepcopy or pickle reads every element)", len(self.__items))
        return CountingList, (list(self.__items),)

    def __repr__(self) -> str:  # text of every element, as good as a copy (re.findall(r"\d+", repr(x)))
        CountingList._add("repr(x) or str(x) (writes out every element)", len(self.__items))
        return repr(self.__items)


def plain_list(ids: Iterable[Any]) -> list[Any]:
    """``ids`` as a plain list. A :class:`CountingList` is read as one counted slice of every element (the same count
    iterating it gives, without a counted step per element: a 60,000-token history copied element by element cost a
    second per check, chapter 4's); a list or tuple is copied whole; anything else, element by element."""
    return list(ids[:]) if isinstance(ids, (list, tuple, CountingList)) else list(ids)
