"""Pinned host memory, simulated, so that chapter 3's uploads can be checked on any machine.

Taught in chapter 3 (pinned ``non_blocking`` transfers). A ``non_blocking``
host-to-device copy is only asynchronous when its source is page-locked
("pinned"); from ordinary (pageable) memory the host first copies it into one of
the driver's pinned staging buffers itself. vLLM therefore asks for pinned memory
wherever it can, and only there: ``is_pin_memory_available()`` is false on WSL,
where hard-coding ``pin_memory=True`` breaks (the review of PR #41429 caught one).

A CPU-only machine has no pinned memory at all (torch raises), so inside
:func:`simulated_pinning` the lab stands in for one of two machines:

* ``available=True``, a GPU machine: ``torch.empty(..., pin_memory=True)``,
  ``torch.tensor(..., pin_memory=True)`` and ``t.pin_memory()`` return host
  tensors that :func:`synclab.device.is_pinned_host` (and ``t.is_pinned()``)
  report as pinned, and ``count_syncs`` reports a ``non_blocking`` upload from any
  other host memory as the staging copy it is (``report.staged``);
* ``available=False``, the WSL case: ``is_pin_memory_available()`` answers
  False, and asking for pinned memory anyway raises, as torch does on a machine
  without a pinned allocator. A ``non_blocking`` upload from pageable memory is
  then the best the code can do: it is still reported as a staging copy, and
  chapter 3's WSL checks accept it.

On a GPU machine ``available=True`` changes nothing (pinning is real), and
``available=False`` refuses pinning the same way.
"""

from __future__ import annotations

import sys
import warnings
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from synclab.device import _FORCED_PINNING, PIN_INTENT, has_cuda, is_pinned_host, runs_on_device_process
from synclab.syncs import attribute_syncs_to_callers

attribute_syncs_to_callers(__file__)  # a sync inside a simulated call belongs to the line that made it


class PinnedMemoryUnavailable(RuntimeError):
    """Pinned memory was requested where the platform has none (vLLM's WSL case)."""


def _refuse(what: str) -> None:
    raise PinnedMemoryUnavailable(
        f"{what}: pinned memory is not available on this platform (vLLM's WSL case). "
        "Ask is_pin_memory_available() and pass its answer, e.g. pin_memory=self.pin_memory.")


def refuse_pinning_a_copy_of(func: Callable, args: tuple) -> None:
    """``torch.tensor(data, pin_memory=True)`` with a tensor or a NumPy array as ``data``: torch refuses it in these
    words before it asks any allocator, so on every machine (a list, or a NumPy scalar, it pins). Pin such data
    with ``.pin_memory()``, or copy it into a pinned buffer."""
    if func is not torch.tensor or not args:
        return
    if isinstance(args[0], torch.Tensor):
        raise RuntimeError("Can't pin tensor constructed from a variable")
    if isinstance(args[0], np.ndarray):
        raise RuntimeError("Can't pin tensor constructed from numpy")


def span_of(tensor: torch.Tensor) -> int:
    """Elements from a tensor's first to its last, gaps included (ATen's ``computeStorageNbytes``, in elements)."""
    if tensor.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))


def copy_keeping_layout(tensor: torch.Tensor, new_buffer: Callable[[int], torch.Tensor]) -> torch.Tensor:
    """``tensor.pin_memory()`` as ATen's ``_pin_memory`` makes it: a new buffer of ``span_of(tensor)`` elements
    (``new_buffer``'s), holding the copy in ``tensor``'s sizes and strides. A transposed tensor is pinned transposed,
    a slice of a wider tensor's columns with its gaps, which its upload then goes through a temporary for."""
    return new_buffer(span_of(tensor)).as_strided(tuple(tensor.shape), tensor.stride()).copy_(tensor)


def _mark_pinned(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        setattr(out, PIN_INTENT, True)
    return out


class _PinningMode(TorchFunctionMode):
    def __init__(self, available: bool, simulate: bool) -> None:
        super().__init__()
        self.available = available
        self.simulate = simulate  # no real pinned allocator: stand in for one

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if kwargs.get("pin_memory"):
            if self.simulate:  # on a GPU torch refuses these itself
                refuse_pinning_a_copy_of(func, args)
            if not self.available:
                _refuse(f"torch.{name}(..., pin_memory=True)")
            if self.simulate:
                with _warnings_said_at(sys._getframe(1)):  # the frame that called torch: the reader's
                    return _mark_pinned(func(*args, **{k: v for k, v in kwargs.items() if k != "pin_memory"}))
        if name == "pin_memory" and args and isinstance(args[0], torch.Tensor):
            if not self.available:
                _refuse("tensor.pin_memory()")
            if self.simulate:  # torch copies into a new page-locked buffer, unless the tensor is pinned already;
                # the copy keeps the tensor's sizes and strides (ATen's _pin_memory), gaps included
                tensor = args[0]
                if is_pinned_host(tensor):
                    return tensor
                new_buffer = lambda span: _mark_pinned(torch.empty(span, dtype=tensor.dtype))  # noqa: E731
                return _mark_pinned(copy_keeping_layout(tensor.detach(), new_buffer))
        if name == "is_pinned" and self.simulate and args and isinstance(args[0], torch.Tensor):
            return is_pinned_host(args[0])
        if name in _WARNING_FACTORIES:  # torch.tensor(a_tensor) warns: said at the reader's line, not this one
            with _warnings_said_at(sys._getframe(1)):
                return func(*args, **kwargs)
        return func(*args, **kwargs)


_WARNING_FACTORIES = frozenset({"tensor", "as_tensor"})


_WARNED: set[tuple[str, int, str]] = set()


@contextmanager
def _warnings_said_at(frame: Any) -> Iterator[None]:
    """torch's warnings from a call made here for the reader's code (``torch.tensor(a_tensor)`` warns that a tensor
    is better cloned), said at ``frame``'s line, as torch says them on a GPU, not at this file's."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        said = (frame.f_code.co_filename, frame.f_lineno, str(warning.message))
        if said in _WARNED:  # once per line, as Python's default filter does (catch_warnings resets its registry)
            continue
        _WARNED.add(said)
        warnings.warn_explicit(warning.message, warning.category, frame.f_code.co_filename, frame.f_lineno,
                               module=frame.f_globals.get("__name__"),
                               registry=frame.f_globals.setdefault("__warningregistry__", {}))


@contextmanager
def simulated_pinning(available: bool = True) -> Iterator[None]:
    """Run the block as on a machine where pinned memory is (or, for WSL, is not) available.

    ``is_pin_memory_available()`` answers ``available`` inside the block: read it
    inside (vLLM's ``Sampler``/runner read it in their constructors).
    """
    simulate = not has_cuda() and not runs_on_device_process()  # the device process has pinned memory of its own
    mode = _PinningMode(available, simulate) if (simulate or not available) else nullcontext()
    _FORCED_PINNING.append(available)
    try:
        with mode:
            yield
    finally:
        _FORCED_PINNING.pop()
