"""Streams and events of the device process, as the host holds them: handles; their order lives in that process.

Taught with chapter 2 (lazy streams). On CUDA a stream is a queue the driver keeps; the host holds a handle, queues
work on it, and learns that the work ran only by waiting (``synchronize``) or asking (``query``). Here the same:
:class:`Stream` and :class:`Event` carry an id, and each call is a message to the device process, which keeps each
stream's queue, runs a stream's work only when the host waits on it, and records the waits as transfers (kind
``Stream.synchronize``, ``Event.synchronize``) and what was asked in order (``Ledger.log``). The API is
``torch.cuda.Stream``'s and ``torch.cuda.Event``'s, so code written for CUDA runs on it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from synclab.sim.device_process.wire import reader_line
from synclab.syncs import SyncKind, attribute_syncs_to_callers

attribute_syncs_to_callers(__file__)


class Stream:
    """``torch.cuda.Stream`` on the simulated GPU: work queued inside ``with stream:`` (or
    ``gpu.stream(stream)``) runs in order on it."""

    def __init__(self, gpu: Any, *, sid: int | None = None) -> None:
        self.gpu = gpu
        if sid is None:  # a new side stream
            sid = gpu.new_id()
            gpu.send(("stream", sid))
        self.sid = sid
        self._before: list[Stream] = []

    @property
    def name(self) -> str:
        """The device process's name for it, as its log says it."""
        return "default" if self.sid == 0 else f"side stream {self.sid}"

    def wait_stream(self, other: "Stream") -> None:
        """Work queued on this stream from now on runs after everything queued on ``other`` so far."""
        self.gpu.send(("wait_stream", self.sid, other.sid))

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = Event(self.gpu) if event is None else event
        event.record(self)
        return event

    def synchronize(self) -> None:
        """The host waits until this stream has run everything queued on it: a sync."""
        self.gpu.ask(("sync_stream", self.sid, SyncKind.STREAM_SYNC.value, reader_line()))

    def query(self) -> bool:
        """Whether this stream has run everything queued on it; no wait (a second look that finds it done: the host
        polled, a wait)."""
        return self.gpu.ask(("query_stream", self.sid, reader_line()))

    def __enter__(self) -> "Stream":
        self._before.append(self.gpu.current_stream())
        self.gpu.use(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.gpu.use(self._before.pop())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.gpu is self.gpu and other.sid == self.sid

    def __hash__(self) -> int:
        return hash((id(self.gpu), self.sid))

    def __repr__(self) -> str:
        return f"<simulated stream {'default' if self.sid == 0 else self.sid} on {self.gpu.device}>"


class Event:
    """``torch.cuda.Event`` on the simulated GPU. ``blocking=True``: the host sleeps in ``synchronize`` instead of
    spinning (recorded in the log; both are a wait)."""

    def __init__(self, gpu: Any, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        self.gpu, self.blocking, self.enable_timing = gpu, blocking, enable_timing
        self.eid = gpu.new_id()

    def record(self, stream: Stream | None = None) -> None:
        """Mark the point the stream has been queued to: the event completes when the stream runs that far."""
        self.gpu.send(("record", self.eid, (stream or self.gpu.current_stream()).sid))

    def wait(self, stream: Stream | None = None) -> None:
        """Work queued on ``stream`` (the current one) from now on runs after the event's work."""
        self.gpu.send(("wait_event", self.eid, (stream or self.gpu.current_stream()).sid))

    def synchronize(self) -> None:
        """The host waits until the event's work has run: a sync."""
        self.gpu.ask(("sync_event", self.eid, SyncKind.EVENT_SYNC.value, reader_line(), self.blocking))

    def query(self) -> bool:
        """Whether the event's work has run; no wait (a second look that finds it done: the host polled, a wait)."""
        return self.gpu.ask(("query_event", self.eid, reader_line()))


@contextmanager
def using(gpu: Any, stream: Stream | None) -> Iterator[None]:
    """``torch.cuda.stream(stream)``: work queued inside runs on ``stream`` (None: no change)."""
    if stream is None:
        yield
        return
    with stream:
        yield
