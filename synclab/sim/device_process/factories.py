"""Tensors made on the simulated GPU by its name: ``torch.empty(..., device="simgpu")``, ``t.to("simgpu")``.

Taught with chapter 0's sync table. torch sends a factory given the device's name to the device's kernels
(PrivateUse1's, renamed ``simgpu``); these make a :class:`~.handle.DeviceTensor` on the GPU started last and queue the
same factory to the device process; ``t.pin_memory()`` makes a pinned buffer there. The other factories reach these: ``zeros`` is ``empty`` then ``zero_``,
``t.to(device)`` is ``empty`` then ``copy_`` (an upload, counted by the handle), and ``torch.tensor(data,
device=...)`` copies through ``_copy_from`` (a synchronous upload, as on CUDA).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from synclab.sim.device_process.wire import DEVICE_TYPE
from synclab.sim.pinning import copy_keeping_layout
from synclab.syncs import attribute_syncs_to_callers

attribute_syncs_to_callers(__file__)  # a transfer made here belongs to the reader's line that called

_LIBRARY: list[torch.library.Library] = []  # kept alive: the kernels stay registered while it lives

# factories whose output size is known before they run; arange's is computed, and its out= form would resize
_MADE_HERE = ("empty.memory_format", "empty_strided", "arange", "arange.start", "arange.start_step")


def _factory(name: str, current_gpu: Callable[[], Any]) -> Any:
    op = getattr(torch.ops.aten, name.split(".")[0])
    overload = getattr(op, name.split(".")[1] if "." in name else "default")

    def make(*args: Any, **kwargs: Any) -> torch.Tensor:
        gpu = current_gpu()
        meta = overload(*args, **{**kwargs, "device": torch.device("meta"), "pin_memory": None})
        out = gpu.tensor_for(meta)
        gpu.send(("op", overload.name(), args, {**kwargs, "pin_memory": None}, [out._id],
                  [(tuple(out.shape), str(out.dtype).removeprefix("torch."))]))
        return out
    return make


def _copy_from(source: torch.Tensor, target: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``torch.tensor(data, device=...)``: the host's values copied into the device tensor just made."""
    gpu = getattr(target, "_gpu", None)
    if gpu is not None and getattr(source, "_gpu", None) is None:
        gpu.write(target, source, non_blocking)
        return target
    raise NotImplementedError(f"_copy_from from {source.device} to {target.device}")


def _pinning(current_gpu: Callable[[], Any]) -> tuple[Callable[..., torch.Tensor], Callable[..., bool]]:
    """``t.pin_memory()`` and ``t.is_pinned()`` for host tensors: a pinned buffer of the GPU started last (host
    memory both processes map, chapter 3), and whether a tensor lies in one."""
    def pin_memory(tensor: torch.Tensor, device: Any = None) -> torch.Tensor:
        # torch keeps the layout (ATen's _pin_memory): a slice of wider rows is pinned with its gaps
        return copy_keeping_layout(tensor, lambda span: current_gpu().pinned((span,), tensor.dtype))

    def is_pinned(tensor: torch.Tensor, device: Any = None) -> bool:
        try:
            return current_gpu().pinned_view(tensor) is not None
        except RuntimeError:  # no simulated GPU running: no pinned memory
            return False
    return pin_memory, is_pinned


def register(current_gpu: Callable[[], Any]) -> None:
    """Once per process: the device's kernels for the factories (made on ``current_gpu()``) and for
    ``_copy_from``; the host's for pinning (``torch.empty(..., pin_memory=True)`` is not one of them yet: torch
    asks a C++ allocator for it)."""
    if _LIBRARY:
        return
    library = torch.library.Library("aten", "IMPL")
    for name in _MADE_HERE:
        library.impl(name, _factory(name, current_gpu), "PrivateUse1")
    library.impl("_copy_from", _copy_from, "PrivateUse1")
    pin_memory, is_pinned = _pinning(current_gpu)
    with warnings.catch_warnings():  # torch warns that a CPU kernel is overridden: these two, on purpose
        warnings.simplefilter("ignore")
        library.impl("_pin_memory", pin_memory, "CPU")
        library.impl("is_pinned", is_pinned, "CPU")
    _LIBRARY.append(library)
    assert torch.device(DEVICE_TYPE).type == DEVICE_TYPE
