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
import types
import weakref
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from synclab.device import (_SIMULATED_GPU, PIN_INTENT, TensorRef, device_process, is_async_host_side,
                            is_device_tensor, mark_device, unmark_device)
from synclab.sim.stream_log import SimLog, StreamEdge
from synclab.syncs import (IN_FLIGHT, SyncKind, _target_dtype, _target_is_device, _user_frame,
                           attribute_syncs_to_callers, in_flight_value, location, record_simulated_wait)

attribute_syncs_to_callers(__file__)

GARBAGE = IN_FLIGHT  # what a simulated host buffer holds before its copy has landed (synclab.syncs.in_flight_value)


@dataclass(eq=False)  # compared by identity: two copies of equal tensors are still two copies
class _PendingCopy:
    dst: torch.Tensor  # host
    data: torch.Tensor  # the values the copy will deliver


@dataclass(eq=False)
class _PendingUpload:
    """A non-blocking upload from pinned memory: the device reads ``source`` when the stream gets to it."""

    source: torch.Tensor  # pinned host memory; the host must not write it until a wait covers the copy
    version: int  # source._version when the copy was queued: a later in-place write changes it
    where: str  # the line of code that queued it


class _SimDevice:
    """The state of one simulated device: its streams, the current one, and the copies in flight."""

    def __init__(self) -> None:
        self.log = SimLog()
        self.edges: list[StreamEdge] = []  # every wait_stream, with its direction
        self.races: list[str] = []  # host writes into pinned buffers whose upload no wait had covered yet
        self._names = itertools.count(1)
        self.streams: list[SimStream] = []
        self.default_stream = SimStream(self, name="default")
        self.current = self.default_stream

    @property
    def streams_created(self) -> int:
        """Streams the code under test created (the default stream is not one of them)."""
        return len(self.streams) - 1

    def copies_queued(self) -> set[int]:
        """The copies to the host queued on any stream and not landed yet (each by identity)."""
        return {id(copy) for stream in self.streams for copy in stream.pending}

    def held_by(self, tensors: Any) -> list[str]:
        """The streams whose ``record_stream`` holds one of ``tensors`` (until their queued copies land)."""
        return sorted({stream.name for stream in self.streams for t in stream.in_use if any(t is a for a in tensors)})

    def memory_kept(self, refs: list[TensorRef]) -> bool:
        """Whether the memory of every tensor of ``refs`` is still kept (here: the tensor is, by the reader's code or
        a stream's ``record_stream``)."""
        return all(ref() is not None for ref in refs)

    def watch_frees(self, refs: list[TensorRef]) -> list[bool]:
        """From now on, a flag per tensor of ``refs`` as it is freed: whether no host wait had been logged since.
        On a GPU a block freed before the wait may be handed to the next step while a stream still copies from it."""
        start, flags = len(self.log.entries), []
        for tensor in [ref() for ref in refs]:
            if tensor is not None:
                weakref.finalize(tensor, lambda: flags.append("host waits" not in self.log.ops()[start:]))
        return flags

    def freed_before_a_wait(self, watched: list[bool]) -> int:
        """How many of the tensors :meth:`watch_frees` watched were freed before a host wait."""
        return sum(watched)

    def next_name(self) -> str:
        return f"side stream {next(self._names)}"

    def land_all(self) -> None:
        for stream in self.streams:
            stream.land(stream.pending)

    def check_upload(self, stream: SimStream, upload: _PendingUpload) -> None:
        """The copy runs now (a wait covers it): had the host already written its source, the device got that."""
        if upload.source._version != upload.version:
            race = (f"the host wrote a pinned buffer before its upload ran (queued at {upload.where}); "
                    "the device may read the new values")
            self.races.append(race)
            self.log.add("RACE", stream.name, race)


class SimStream:
    """A simulated ``torch.cuda.Stream``: an ordered queue; copies queued on it land when waited for."""

    def __init__(self, device: _SimDevice | None = None, *, name: str | None = None, **_: Any) -> None:
        self.device = device if device is not None else _current_device()
        self.device.streams.append(self)
        self.name = name or self.device.next_name()
        self.pending: list[_PendingCopy] = []
        self.pending_uploads: list[_PendingUpload] = []
        self.in_use: list[torch.Tensor] = []  # blocks marked with record_stream: not reused while work is queued
        if name is None:  # created by the code under test
            self.device.log.add("create stream", self.name)

    def __enter__(self) -> SimStream:
        """``with stream:``, as ``torch.Stream`` allows: ``with torch.cuda.stream(stream):`` by another name."""
        self._entered = _use_stream(self)
        self._entered.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._entered.__exit__(*exc)

    def wait_stream(self, other: SimStream) -> None:
        """Later work on ``self`` waits for everything queued on ``other`` so far: an edge ``self <- other``."""
        self.device.log.add("wait_stream", self.name, f"waits for {other.name}")
        self.device.edges.append(StreamEdge(waiter=self.name, waits_for=other.name, at=len(self.device.log.entries) - 1))

    def wait_event(self, event: SimEvent) -> None:
        """Later work on ``self`` waits for what ``event`` recorded (CUDA's ``cudaStreamWaitEvent``): an edge
        ``self <- the event's stream``. An event never recorded is no wait at all, as on CUDA (nor is one recorded
        only on an earlier simulated device: what it covered there has run)."""
        event._on_live_device()
        if event._stream is None:
            self.device.log.add("wait_event", self.name, "an event never recorded: no wait")
            return
        self.device.log.add("wait_event", self.name, f"waits for {event._stream.name} (an event recorded there)")
        self.device.edges.append(StreamEdge(waiter=self.name, waits_for=event._stream.name,
                                            at=len(self.device.log.entries) - 1))

    def record_event(self, event: SimEvent | None = None) -> SimEvent:
        """Record ``event`` (a new one if None) on this stream and return it, as ``torch.cuda.Stream.record_event``."""
        event = event if event is not None else SimEvent()
        event.record(self)
        return event

    def synchronize(self) -> None:
        record_simulated_wait(SyncKind.STREAM_SYNC, f"Stream.synchronize ({self.name})")
        self.device.log.add("host waits", self.name, "Stream.synchronize")
        self.land(self.pending)

    def land(self, copies: list[_PendingCopy], uploads: list[_PendingUpload] | None = None) -> None:
        for copy in list(copies):
            copy.dst.copy_(copy.data)
            if copy in self.pending:
                self.pending.remove(copy)
        for upload in list(self.pending_uploads if uploads is None else uploads):
            self.device.check_upload(self, upload)
            if upload in self.pending_uploads:
                self.pending_uploads.remove(upload)
        if not self.pending:  # the work queued on this stream is done: blocks it used may be reused
            self.in_use.clear()

    def record_use(self, tensor: torch.Tensor) -> None:
        """``tensor.record_stream(self)``: its memory is not reused before the work queued here is done.

        On a GPU the caching allocator, when the tensor is freed, waits for the stream's queued work before
        handing the block to anyone else. Here the stream keeps the tensor until its queue has landed.
        """
        self.in_use.append(tensor)
        self.device.log.add("record_stream", self.name, f"{list(tensor.shape)} kept until this stream's work is done")

    def __repr__(self) -> str:
        return f"<SimStream {self.name}>"


class SimEvent:
    """A simulated ``torch.cuda.Event``: remembers the copies queued before ``record()`` on its stream."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self._device = _current_device()
        self.blocking = blocking
        self._stream: SimStream | None = None
        self._copies: list[_PendingCopy] = []
        self._uploads: list[_PendingUpload] = []
        self._polls = 0  # query() calls that found the copies still pending

    @property
    def device(self) -> _SimDevice:
        return self._on_live_device()

    def _on_live_device(self) -> _SimDevice:
        """The device it is used on. An event outlives the ``simulated_cuda()`` block it was made in when code keeps
        it (a module-level event, made once): on a GPU it is the process's for good, so here it serves the device
        now simulated, and its record and waits are that device's."""
        if not any(d is self._device for d in _DEVICE):
            self._device, self._stream, self._copies, self._uploads = _current_device(), None, [], []
        return self._device

    def record(self, stream: SimStream | None = None) -> None:
        self._stream = stream or self.device.current
        self._copies = list(self._stream.pending)
        self._uploads = list(self._stream.pending_uploads)
        self.device.log.add("record event", self._stream.name, f"after {len(self._copies)} queued copies")

    def query(self) -> bool:
        """Done yet? The first look finds the copies still queued; asked again, the device has got there.

        On a GPU a loop on ``query()`` ends once the copies have run: the host spins until then, a wait
        as real as ``synchronize()`` (the busy-poll a blocking event avoids). So the second look lands
        the copies and counts that wait.
        """
        self._on_live_device()
        if self._stream is None or all(c not in self._stream.pending for c in self._copies):
            return True
        self._polls += 1
        if self._polls < 2:
            return False
        record_simulated_wait(SyncKind.EVENT_SYNC, f"Event.query polled until done ({self._stream.name})")
        self.device.log.add("host waits", self._stream.name, "Event.query polled until the copies landed")
        self._stream.land(self._copies, self._uploads)
        return True

    def wait(self, stream: SimStream | None = None) -> None:
        """``event.wait(stream)``: ``stream`` (the current one by default) waits for this event; no host wait."""
        (stream or self.device.current).wait_event(self)

    def synchronize(self) -> None:
        device = self.device
        stream = self._stream.name if self._stream else "no stream"
        record_simulated_wait(SyncKind.EVENT_SYNC, f"Event.synchronize ({stream})")
        device.log.add("host waits", stream, "Event.synchronize" + (" (blocking)" if self.blocking else ""))
        if self._stream is not None:
            self._stream.land(self._copies, self._uploads)


_DEVICE: list[_SimDevice] = []  # the device of the innermost simulated_cuda() block


def _current_device() -> _SimDevice:
    if not _DEVICE:
        raise RuntimeError("simulated streams exist only inside synclab.sim.cuda.simulated_cuda()")
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
def simulated_cuda(async_copies: bool = True) -> Iterator[_SimDevice]:
    """Replace ``torch.cuda``'s streams and events by simulated ones for the block.

    Yields the simulated device: ``.log`` lists what was done, ``.streams_created``
    counts the streams the code under test created. Use it with tensors on the
    simulated device (``synclab.device.SIM_DEVICE``) and ``count_syncs(simulate=True)``;
    on a GPU machine too, real CUDA work must stay outside the block.

    ``async_copies=False`` keeps the reader's own ``non_blocking`` copies as a CPU runs them (done on
    return): the waits still work and are counted, for checks that find an unwaited copy another way.

    Inside ``running_on(gpu)`` the device process is the GPU and its streams are already ``torch.cuda``'s: the block
    yields what the watcher reads of them (:class:`synclab.sim.device_process.streams_seen.StreamsSeen`, the same
    names) and changes nothing.
    """
    if (gpu := device_process()) is not None:
        from synclab.sim.device_process.streams_seen import StreamsSeen  # it reads SimLog from here
        yield StreamsSeen(gpu)  # type: ignore[misc]
        return
    device = _SimDevice()
    patches: dict[str, Callable[..., Any] | type] = {
        # torch.cuda.StreamContext(s) is the class torch.cuda.stream(s) returns: the same context here
        "Stream": SimStream, "Event": SimEvent, "stream": _use_stream, "StreamContext": _use_stream,
        "current_stream": lambda device=None: _current_device().current, "synchronize": _synchronize,
        "default_stream": lambda device=None: _current_device().default_stream,
        "is_available": lambda: True,  # as on a GPU machine: code that asks takes its CUDA path, and its syncs count
    }
    originals = {name: getattr(torch.cuda, name) for name in patches}
    # torch.Tensor inherits record_stream from its C base: put back exactly what was there (nothing, usually), or
    # the class would keep a copy of its own after the block
    own_record_stream = torch.Tensor.__dict__.get("record_stream")
    generic_event = torch.Event  # torch's device-generic event, as vLLM's code wrote it for a while: simulated too
    _DEVICE.append(device)
    _SIMULATED_GPU.append(True)
    for name, value in patches.items():
        setattr(torch.cuda, name, value)
    torch.Tensor.record_stream = _record_stream  # type: ignore[method-assign]
    torch.Event = _generic_event  # type: ignore[misc, assignment]
    try:
        with names_bound_before(originals), _AsyncCopies() if async_copies else nullcontext():
            yield device
    finally:
        if own_record_stream is None:
            del torch.Tensor.record_stream
        else:
            torch.Tensor.record_stream = own_record_stream  # type: ignore[method-assign]
        for name, value in originals.items():
            setattr(torch.cuda, name, value)
        torch.Event = generic_event  # type: ignore[misc]
        for stream in device.streams:  # uploads no wait covered: their sources must still be untouched
            for upload in list(stream.pending_uploads):
                device.check_upload(stream, upload)
        _DEVICE.remove(device)
        _SIMULATED_GPU.pop()


@contextmanager
def names_bound_before(originals: dict[str, Any]) -> Iterator[None]:
    """``torch.cuda``'s real classes and functions (``originals``, by name) reach what its attributes now are, for the
    block: code that bound them before it (``from torch.cuda import Stream, stream`` at the top of a cell,
    ``partial(torch.cuda.Event, blocking=True)``) gets what ``torch.cuda.Stream`` now gives, as it would on a GPU.

    A class gets a ``__new__`` that builds the simulated object; a function, for the block, code that calls
    ``torch.cuda``'s attribute of its name (its globals are that module's). Both are put back after."""
    classes = {name: real for name, real in originals.items() if isinstance(real, type)}
    functions = {name: real for name, real in originals.items() if isinstance(real, types.FunctionType)
                 and not real.__code__.co_freevars and real.__globals__ is vars(torch.cuda)}
    own_new = {name: real.__dict__.get("__new__") for name, real in classes.items()}
    codes = {name: (real.__code__, real.__defaults__) for name, real in functions.items()}
    for name, real in classes.items():
        real.__new__ = _builds(name)  # type: ignore[method-assign]
    for name, real in functions.items():
        real.__code__, real.__defaults__ = _forwards_to(name), None
    try:
        yield
    finally:
        for name, real in functions.items():
            real.__code__, real.__defaults__ = codes[name]
        for name, real in classes.items():
            if own_new[name] is None:
                del real.__new__
            else:
                real.__new__ = own_new[name]  # type: ignore[method-assign]


def _builds(name: str) -> staticmethod:
    """A ``__new__`` for the real ``torch.cuda.<name>``: the simulated one's object (``__init__`` is then not run)."""

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        return getattr(torch.cuda, name)(*args, **kwargs)

    return staticmethod(new)


def _forwards_to(name: str) -> types.CodeType:
    """Code that calls ``torch.cuda.<name>`` (looked up in the function's own globals) with the same arguments."""
    namespace: dict[str, Any] = {}
    exec(f"def {name}(*args, **kwargs):\n    return {name}(*args, **kwargs)\n", namespace)
    return namespace[name].__code__


def _generic_event(device: Any = None, *, enable_timing: bool = False, blocking: bool = False,
                   interprocess: bool = False) -> SimEvent:
    """``torch.Event(device, ...)`` inside :func:`simulated_cuda`: the simulated GPU's event (the device is the one)."""
    return SimEvent(enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


_REAL_RECORD_STREAM = torch.Tensor.record_stream


def _record_stream(tensor: torch.Tensor, stream: Any) -> None:
    """``Tensor.record_stream`` inside :func:`simulated_cuda`: a simulated stream keeps the block, as CUDA's does."""
    if isinstance(stream, SimStream):
        stream.record_use(tensor)
        return None
    return _REAL_RECORD_STREAM(tensor, stream)


class _AsyncCopies(TorchFunctionMode):
    """Inside :func:`simulated_cuda`, the reader's own non-blocking copies behave as on a GPU.

    * device to pinned host (``t.to("cpu", non_blocking=True)``, ``pinned.copy_(t, non_blocking=True)``):
      the host buffer holds :data:`GARBAGE` until a wait covers the copy;
    * pinned host to device (``pinned.to(device, non_blocking=True)``, ``dev.copy_(pinned, non_blocking=True)``):
      the device gets the values, and the source is watched: a host write into it before a wait
      covers the copy is a race, listed in ``device.races``.

    Copies into or out of pageable memory are synchronous on a GPU, and stay so here.
    """

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "to" and args and isinstance(args[0], torch.Tensor) and _non_blocking(args[1:], kwargs):
            src, to_device = args[0], _target_is_device(args[1:], kwargs)
            if is_device_tensor(src) and to_device is False:
                return copy_to_host_async(src)
            dtype = _target_dtype(args[1:], kwargs)
            if not is_device_tensor(src) and to_device and is_async_host_side(src, dtype=dtype):
                out = mark_device(func(*args, **kwargs).clone())  # its own memory, as a device copy has
                _watch_upload(src)
                return out
        if name == "copy_" and len(args) >= 2 and _non_blocking(args[2:], kwargs):
            dst, src = args[0], args[1]
            if is_device_tensor(src) and not is_device_tensor(dst) and is_async_host_side(dst, src):
                dst.fill_(in_flight_value(dst.dtype))
                stream = _current_device().current
                stream.pending.append(_PendingCopy(dst, unmark_device(src.detach().clone())))
                stream.device.log.add("copy to host", stream.name, f"{list(src.shape)} non_blocking")
                return dst
            if is_device_tensor(dst) and not is_device_tensor(src) and is_async_host_side(src, dst):
                _watch_upload(src)
        return func(*args, **kwargs)


def _non_blocking(args: tuple, kwargs: dict) -> bool:
    return bool(kwargs.get("non_blocking")) or any(a is True for a in args)


def _watch_upload(source: torch.Tensor) -> None:
    device = _current_device()
    filename, lineno, function, code = _user_frame()
    where = location(filename, lineno, code)
    device.current.pending_uploads.append(_PendingUpload(source, source._version, where))
    device.log.add("copy to device", device.current.name, f"{list(source.shape)} non_blocking from pinned memory")


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
    dst = torch.full(tensor.shape, in_flight_value(tensor.dtype), dtype=tensor.dtype)  # the host buffer, unwritten
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
