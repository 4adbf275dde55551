"""What crosses between the reader's process and the device process (:mod:`synclab.sim.device_process`).

Host tensors cross as their bytes (not as shared memory: the device process keeps a copy, as an upload does), ops as
their ATen names, device tensors as the id the reader's side gave them when it queued the op that makes them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from synclab.syncs import _user_frame, allowed_by, attribute_syncs_to_callers, location

attribute_syncs_to_callers(__file__)

DEVICE_TYPE = "simgpu"  # the simulated device's name, as torch.device reports it: "simgpu:0"


def register_device_name() -> None:
    """``torch.device("simgpu")`` names PrivateUse1, with a device guard, so that indexing and factories accept it;
    both processes register it (a device crosses the connection by its name)."""
    if torch._C._get_privateuse1_backend_name() != DEVICE_TYPE:
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        _setup_privateuseone_for_python_backend(DEVICE_TYPE)


@dataclass(frozen=True)
class Line:
    """The line of the reader's code that asked for a transfer, and whether it ran inside ``gpu_sync_allowed()``
    (a label the reader's side gives: it can mislabel a transfer, never uncount one)."""

    filename: str
    lineno: int
    function: str
    code: str
    allowed: bool = False
    allowed_in: str = ""  # the file whose code opened the innermost allowed region

    def __str__(self) -> str:
        return f"{location(self.filename, self.lineno)} in {self.function}: {self.code}"


def reader_line() -> Line:
    """The line of the reader's code that asked, as the device process records it with a transfer."""
    openers = allowed_by()
    return Line(*_user_frame(), allowed=bool(openers), allowed_in=openers[-1] if openers else "")


@dataclass(frozen=True)
class Ref:
    """A device tensor, by the id the reader's side gave it."""

    id: int


@dataclass(frozen=True)
class PinnedView:
    """A view of a pinned host buffer, which both processes map: the buffer's id and the view's layout in it."""

    pid: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int


@dataclass(frozen=True)
class HostBytes:
    """A host tensor's values, dtype and shape: what an upload carries."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes


def pack(tensor: torch.Tensor) -> HostBytes:
    flat = tensor.detach().contiguous().reshape(-1)  # [numel]
    return HostBytes(str(flat.dtype).removeprefix("torch."), tuple(tensor.shape),
                     flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")


def unpack(host: HostBytes) -> torch.Tensor:
    dtype = getattr(torch, host.dtype)
    if not host.data:
        return torch.empty(host.shape, dtype=dtype)
    return torch.frombuffer(bytearray(host.data), dtype=torch.uint8).view(dtype).reshape(host.shape)


def op_name(func: Any) -> str:
    """``aten::add.Tensor`` for ``torch.ops.aten.add.Tensor``."""
    return func.name()


@functools.lru_cache(maxsize=None)
def resolve(name: str) -> Any:
    namespace, rest = name.split("::")
    op, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace), op)
    return getattr(packet, overload or "default")


def device_of(value: Any) -> Any:
    """A ``simgpu`` device argument as the device process runs it: on its CPU."""
    if isinstance(value, torch.device) and value.type == DEVICE_TYPE:
        return torch.device("cpu")
    return value


def leaves(value: Any) -> Iterator[Any]:
    """An op's arguments, flattened: they nest only in tuples, lists and dicts (torch's pytree, without its cost)."""
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    else:
        yield value


def mapped(fn: Callable[[Any], Any], value: Any) -> Any:
    """``value`` with ``fn`` applied to each leaf, its tuples, lists and dicts kept."""
    if isinstance(value, (tuple, list)):
        return type(value)(mapped(fn, v) for v in value)
    if isinstance(value, dict):
        return {k: mapped(fn, v) for k, v in value.items()}
    return fn(value)


def on_the_device(args: Any, data: dict[int, torch.Tensor]) -> Any:
    """``args`` with each :class:`Ref` replaced by its data and each host tensor by its values."""
    return mapped(lambda v: data[v.id] if isinstance(v, Ref) else unpack(v) if isinstance(v, HostBytes)
                    else device_of(v), args)
