"""The reader's process as a GPU machine whose GPU is the device process: what code written for CUDA asks of it.

Taught with chapter 2 (streams) and chapter 3 (pinned memory). Inside :func:`running_on`:

* ``pick_device()`` answers the simulated GPU's device (``simgpu:0``), so the lab's code makes its tensors there,
  and ``count_syncs()`` reports what the device process's ledger counted in its block;
* ``torch.cuda.Stream``, ``Event``, ``stream``, ``current_stream``, ``default_stream`` and ``synchronize`` are the
  simulated GPU's (:mod:`.streams`), and so is ``torch.Event``, so the engine's side stream and its output event run
  there;
* ``torch.einsum`` on device tensors goes to the device as one op, as one launch sequence on a GPU, not as the dozen
  ops torch decomposes it into before a device sees it (each of which would cross on its own);
* pinned memory exists, as on a GPU machine: ``is_pin_memory_available()`` answers True, and a factory given
  ``pin_memory=True`` makes a buffer both processes map (torch's own flag asks a C++ allocator, which this machine
  does not have: the flag is taken off and the tensor pinned with ``pin_memory()``, the device's kernel).

The counts stay in the device process; what this module changes is only which names the reader's code finds.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from synclab.device import _DEVICE_PROCESS, _FORCED_PINNING
from synclab.sim.device_process.handle import einsum_as_one_op
from synclab.sim.pinning import refuse_pinning_a_copy_of
from synclab.syncs import attribute_syncs_to_callers

attribute_syncs_to_callers(__file__)  # a transfer made here belongs to the reader's line that called

_CUDA_NAMES = ("Stream", "Event", "stream", "StreamContext", "current_stream", "default_stream", "synchronize",
               "is_available")


class _MachineCalls(TorchFunctionMode):
    """The two torch calls the machine takes over: ``pin_memory=True`` on a factory (made without the flag, then
    pinned: a buffer the device process maps), and ``torch.einsum`` on device tensors (one op)."""

    sees_no_calls = True  # a device tensor's indexing and reads need not come through it

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if kwargs.get("pin_memory"):
            refuse_pinning_a_copy_of(func, args)  # torch's own refusals come before any allocator
            return func(*args, **{k: v for k, v in kwargs.items() if k != "pin_memory"}).pin_memory()
        if func is torch.einsum and args and isinstance(args[0], str) and not kwargs:
            whole = einsum_as_one_op(args[0], args[1:])
            return func(*args) if whole is None else whole
        return func(*args, **kwargs)


def _generic_event_of(gpu: Any) -> type:
    """``torch.Event(device, ...)`` making ``gpu``'s events: a class still, as torch's own ``isinstance`` checks
    on ``torch.Event`` need."""
    class Event:
        def __new__(cls, device: Any = None, **flags: bool) -> Any:
            return gpu.Event(**flags)
    return Event


@contextmanager
def running_on(gpu: Any) -> Iterator[Any]:
    """Code inside runs as on a machine whose GPU is ``gpu`` (a :class:`~.handle.SimulatedGPU`)."""
    names = {"Stream": gpu.Stream, "Event": lambda enable_timing=False, blocking=False, interprocess=False:
             gpu.Event(enable_timing=enable_timing, blocking=blocking, interprocess=interprocess),
             "stream": gpu.stream, "StreamContext": gpu.stream,
             "current_stream": lambda device=None: gpu.current_stream(),
             "default_stream": lambda device=None: gpu.default_stream(),
             "synchronize": lambda device=None: gpu.synchronize(), "is_available": lambda: True}
    originals = {name: getattr(torch.cuda, name) for name in _CUDA_NAMES}
    for name, value in names.items():
        setattr(torch.cuda, name, value)
    generic_event = torch.Event  # torch's device-generic event (vLLM's code wrote it for a while): the GPU's too
    torch.Event = _generic_event_of(gpu)  # type: ignore[misc]
    _FORCED_PINNING.append(True)
    _DEVICE_PROCESS.append(gpu)  # pick_device() names its device (the lab's code makes its tensors there), and
    #                                count_syncs reads its ledger
    try:
        with _MachineCalls():
            yield gpu
    finally:
        _DEVICE_PROCESS.pop()
        _FORCED_PINNING.pop()
        for name, value in originals.items():
            setattr(torch.cuda, name, value)
        torch.Event = generic_event  # type: ignore[misc]
