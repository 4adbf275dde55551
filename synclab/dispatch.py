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
:class:`CountingList` counts the elements of a Python list that code reads (chapter 4's
reverse scan against ``list.index``; chapter 6's output histories).
"""

from __future__ import annotations

import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from torch.overrides import TorchFunctionMode

from synclab.device import called_from_device_layer
from synclab.syncs import attribute_syncs_to_callers

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


class CountingList(list):
    """A list that counts the elements Python code touches (``touched``), and by which operation (``by_op``)."""

    touched = 0
    by_op: Counter[str] = Counter()

    @staticmethod
    def _add(op: str, n: int) -> None:
        CountingList.touched += n
        CountingList.by_op[op] += n

    def __getitem__(self, key: Any) -> Any:
        item = super().__getitem__(key)
        if isinstance(key, slice):
            self._add("slicing (x[a:b] copies the slice)", len(item))
        else:
            self._add("reading items one by one (x[i])", 1)
        return item

    def index(self, value: Any, *args: Any) -> int:
        position = super().index(value, *args)
        self._add(f"list.index({value!r}) (scans from the start)", position + 1 - (args[0] if args else 0))
        return position

    def count(self, value: Any) -> int:
        self._add(f"list.count({value!r}) (reads every element)", len(self))
        return super().count(value)

    def __contains__(self, value: Any) -> bool:
        self._add(f"`{value!r} in x` (reads every element)", len(self))
        return super().__contains__(value)

    def __iter__(self) -> Iterator[Any]:
        for item in super().__iter__():
            self._add("iterating over the list from the start", 1)
            yield item

    def __reversed__(self) -> Iterator[Any]:
        for item in super().__reversed__():
            self._add("iterating backwards (reversed(x))", 1)
            yield item

    def copy(self) -> list:
        self._add("x.copy() (copies the whole list)", len(self))
        return list(super().__iter__())

    def __add__(self, other: Any) -> list:
        self._add("x + y (builds a new list of every element)", len(self) + len(other))
        return list.__add__(self, other)
