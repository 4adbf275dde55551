"""Tensors made on the simulated GPU by its name: ``torch.empty(..., device="simgpu")``, ``t.to("simgpu")``.

Taught with chapter 0's sync table. torch sends a factory given the device's name to the device's kernels
(PrivateUse1's, renamed ``simgpu``); these make a :class:`~.handle.DeviceTensor` on the GPU started last and queue the
same factory to the device process. The other factories reach these: ``zeros`` is ``empty`` then ``zero_``,
``t.to(device)`` is ``empty`` then ``copy_`` (an upload, counted by the handle), and ``torch.tensor(data,
device=...)`` copies through ``_copy_from`` (a synchronous upload, as on CUDA).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from synclab.sim.device_process.wire import DEVICE_TYPE

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
        gpu.send(("op", overload.name(), args, {**kwargs, "pin_memory": None}, [out._id]))
        return out
    return make


def _copy_from(source: torch.Tensor, target: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``torch.tensor(data, device=...)``: the host's values copied into the device tensor just made."""
    gpu = getattr(target, "_gpu", None)
    if gpu is not None and getattr(source, "_gpu", None) is None:
        gpu.write(target, source, non_blocking)
        return target
    raise NotImplementedError(f"_copy_from from {source.device} to {target.device}")


def register(current_gpu: Callable[[], Any]) -> None:
    """Once per process: the device's kernels for the factories (made on ``current_gpu()``) and for
    ``_copy_from``."""
    if _LIBRARY:
        return
    library = torch.library.Library("aten", "IMPL")
    for name in _MADE_HERE:
        library.impl(name, _factory(name, current_gpu), "PrivateUse1")
    library.impl("_copy_from", _copy_from, "PrivateUse1")
    _LIBRARY.append(library)
    assert torch.device(DEVICE_TYPE).type == DEVICE_TYPE
