"""Count the calls that go through torch: every one pays the dispatcher, whatever it computes.

Taught in chapter 5 (list-based caches). Reading one integer out of a tensor,
``int(cumsum[-1])``, is two torch calls (``__getitem__`` builds a 0-d tensor,
``__int__`` reads it out) and a deallocation. Each crosses from Python into C++,
through argument parsing, the dispatcher and boxing: about a microsecond on a
fast host, against tens of nanoseconds for indexing a Python list. On the hot
path of a scheduler that asks thousands of such questions per step, that is
the difference.

:func:`count_torch_calls` counts them with a ``TorchFunctionMode``: a count, the
same on every machine, so tests can assert it where they must not assert time.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from torch.overrides import TorchFunctionMode


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
        self.calls.by_name[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def count_torch_calls() -> Iterator[TorchCalls]:
    """Count torch functions and tensor methods called in the block (``t[i]``, ``int(t)``, ``t.tolist()``, ...)."""
    calls = TorchCalls()
    with _Counting(calls):
        yield calls
