"""CUDA streams and events, simulated on a CPU-only machine, so the asynchronous code path runs and can be checked.

Taught in chapter 2 (lazy streams). vLLM's runner copies its outputs to the host
on a side stream and hands back an object whose ``get_output()`` waits on an
event. On a CPU there are no streams and every copy is done when it returns, so
the same code would run, but it would prove nothing. Inside :func:`simulated_cuda`:

* ``torch.cuda.Stream``, ``torch.cuda.Event``, ``torch.cuda.stream``,
  ``torch.cuda.current_stream`` and ``torch.cuda.synchronize`` are replaced by
  small simulated versions that keep a log of what was asked, in order;
* a non-blocking device-to-host copy made through :func:`copy_to_host_async`
  returns a host tensor full of garbage (:data:`GARBAGE`). Its data arrives when
  an event recorded after it on the same stream is synchronised, or the whole
  device is. That is what a GPU does, except that there the garbage is whatever
  the memory held before;
* a wait (``Event.synchronize``, ``Stream.synchronize``, ``torch.cuda.synchronize``)
  is counted by :func:`synclab.syncs.count_syncs`, as CUDA's own waits are on a GPU.

The simulation is a model of ordering, not of time: it says *whether* the host
could read data too early, never how long anything takes.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from synclab.device import PIN_INTENT, unmark_device
from synclab.syncs import SyncKind, attribute_syncs_to_callers, record_simulated_wait

attribute_syncs_to_callers(__file__)

GARBAGE = -12345.0  # what a simulated host buffer holds before its copy has landed


@dataclass
class _PendingCopy:
    dst: torch.Tensor  # host
    data: torch.Tensor  # the values the copy will deliver


@dataclass
class SimLog:
    """What the simulated device was asked to do, in order: ``(operation, stream name, detail)``."""

    entries: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, op: str, stream: str, detail: str = "") -> None:
        self.entries.append((op, stream, detail))

    def ops(self) -> list[str]:
        return [op for op, _, _ in self.entries]

    def __str__(self) -> str:
        return "\n".join(f"{i:>3}  {stream:<14} {op:<18} {detail}" for i, (op, stream, detail)
                         in enumerate(self.entries)) or "(nothing)"


class _SimDevice:
    """The state of one simulated device: its streams, the current one, and the copies in flight."""

    def __init__(self) -> None:
        self.log = SimLog()
        self._names = itertools.count(1)
        self.streams: list[SimStream] = []
        self.default_stream = SimStream(self, name="default")
        self.current = self.default_stream

    @property
    def streams_created(self) -> int:
        """Streams the code under test created (the default stream is not one of them)."""
        return len(self.streams) - 1

    def next_name(self) -> str:
        return f"side stream {next(self._names)}"

    def land_all(self) -> None:
        for stream in self.streams:
            stream.land(stream.pending)


class SimStream:
    """A simulated ``torch.cuda.Stream``: an ordered queue; copies queued on it land when waited for."""

    def __init__(self, device: _SimDevice | None = None, *, name: str | None = None, **_: Any) -> None:
        self.device = device if device is not None else _current_device()
        self.device.streams.append(self)
        self.name = name or self.device.next_name()
        self.pending: list[_PendingCopy] = []
        if name is None:  # created by the code under test
            self.device.log.add("create stream", self.name)

    def wait_stream(self, other: SimStream) -> None:
        self.device.log.add("wait_stream", self.name, f"waits for {other.name}")

    def synchronize(self) -> None:
        record_simulated_wait(SyncKind.STREAM_SYNC, f"Stream.synchronize ({self.name})")
        self.device.log.add("host waits", self.name, "Stream.synchronize")
        self.land(self.pending)

    def land(self, copies: list[_PendingCopy]) -> None:
        for copy in list(copies):
            copy.dst.copy_(copy.data)
            if copy in self.pending:
                self.pending.remove(copy)

    def __repr__(self) -> str:
        return f"<SimStream {self.name}>"


class SimEvent:
    """A simulated ``torch.cuda.Event``: remembers the copies queued before ``record()`` on its stream."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.device = _current_device()
        self.blocking = blocking
        self._stream: SimStream | None = None
        self._copies: list[_PendingCopy] = []

    def record(self, stream: SimStream | None = None) -> None:
        self._stream = stream or self.device.current
        self._copies = list(self._stream.pending)
        self.device.log.add("record event", self._stream.name, f"after {len(self._copies)} queued copies")

    def query(self) -> bool:
        return self._stream is None or all(c not in self._stream.pending for c in self._copies)

    def synchronize(self) -> None:
        stream = self._stream.name if self._stream else "no stream"
        record_simulated_wait(SyncKind.EVENT_SYNC, f"Event.synchronize ({stream})")
        self.device.log.add("host waits", stream, "Event.synchronize" + (" (blocking)" if self.blocking else ""))
        if self._stream is not None:
            self._stream.land(self._copies)


_DEVICE: list[_SimDevice] = []  # the device of the innermost simulated_cuda() block


def _current_device() -> _SimDevice:
    if not _DEVICE:
        raise RuntimeError("simulated streams exist only inside synclab.engine.sim_cuda.simulated_cuda()")
    return _DEVICE[-1]


def is_simulating() -> bool:
    return bool(_DEVICE)


@contextmanager
def _use_stream(stream: SimStream | None) -> Iterator[None]:
    device = _current_device()
    previous = device.current
    device.current = stream or previous
    try:
        yield
    finally:
        device.current = previous


def _synchronize(device: Any = None) -> None:
    record_simulated_wait(SyncKind.DEVICE_SYNC, "torch.cuda.synchronize")
    sim = _current_device()
    sim.log.add("host waits", "all streams", "torch.cuda.synchronize")
    sim.land_all()


@contextmanager
def simulated_cuda() -> Iterator[_SimDevice]:
    """Replace ``torch.cuda``'s streams and events by simulated ones for the block.

    Yields the simulated device: ``.log`` lists what was done, ``.streams_created``
    counts the streams the code under test created. Use it with tensors on the
    simulated device (``synclab.device.SIM_DEVICE``) and ``count_syncs(simulate=True)``;
    on a GPU machine too, real CUDA work must stay outside the block.
    """
    device = _SimDevice()
    patches: dict[str, Callable[..., Any] | type] = {
        "Stream": SimStream, "Event": SimEvent, "stream": _use_stream,
        "current_stream": lambda device=None: _current_device().current, "synchronize": _synchronize,
    }
    originals = {name: getattr(torch.cuda, name) for name in patches}
    _DEVICE.append(device)
    for name, value in patches.items():
        setattr(torch.cuda, name, value)
    try:
        yield device
    finally:
        for name, value in originals.items():
            setattr(torch.cuda, name, value)
        _DEVICE.remove(device)


def copy_to_host_async(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor.to("cpu", non_blocking=True)`` for a device tensor, on the current stream.

    On a GPU, torch gives the copy a pinned destination and returns before the data
    is there. Inside :func:`simulated_cuda` the destination is marked as pinned and
    holds :data:`GARBAGE` until the copy is waited for. Elsewhere (a CPU platform)
    the copy is done on return.
    """
    if not is_simulating():
        return tensor.to("cpu", non_blocking=True)
    # Inside a simulation every tensor handed here stands for device memory, marked or not
    # (marks only spread inside count_syncs).
    device = _current_device()
    dst = torch.full(tensor.shape, GARBAGE, dtype=tensor.dtype)  # the host buffer, not yet written
    setattr(dst, PIN_INTENT, True)
    device.current.pending.append(_PendingCopy(dst, unmark_device(tensor.detach().clone())))  # a snapshot
    device.log.add("copy to host", device.current.name, f"{list(tensor.shape)} non_blocking")
    return dst


def host_rows(host: torch.Tensor) -> list[torch.Tensor]:
    """The rows of a host buffer from :func:`copy_to_host_async`, each still known as pinned memory.

    They are views: inside :func:`simulated_cuda` they fill in when the copy lands.
    """
    rows = list(host.unbind(0))
    if getattr(host, PIN_INTENT, False):
        for row in rows:
            setattr(row, PIN_INTENT, True)
    return rows
