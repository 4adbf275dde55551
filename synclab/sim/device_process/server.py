"""The device process: the device's data, the ops the host queued, and every transfer back, counted here.

Taught with chapter 0's sync table and chapter 2's streams. The reader's side (:mod:`.handle`) sends two kinds of
message on its connection: ops, which it does not wait for (each stream queues them, and runs them in order when the
host next waits on it), and requests for data, which it waits for: a transfer, recorded in the
:class:`~.ledger.Ledger` with its kind and the reader's line. Pinned host buffers are memory both processes map: a
copy into one lands when its stream runs. A watcher (a check, the grader) reads the ledger over a connection of its
own. Nothing the reader's connection can send lowers a count: it has no message that resets, edits or reads the
ledger.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

from synclab.sim.device_process.host_pool import as_buffer, block_of
from synclab.sim.device_process.ledger import Ledger
from synclab.sim.device_process.wire import Ref, leaves, on_the_device, pack, register_device_name, resolve
from synclab.syncs import SyncKind, in_flight_value

DEFAULT_STREAM = 0


@dataclass
class Stream:
    """One stream's queue: what the host queued on it and has not been run, and how far it has run."""

    name: str
    queue: deque = field(default_factory=deque)
    queued: int = 0  # messages ever queued: an event recorded now completes when ``ran`` reaches this
    ran: int = 0

    def copies_queued(self) -> list[int]:
        """The downloads queued here and not run yet, each by its place in the stream (``ran`` counts from 0)."""
        return [self.ran + i for i, message in enumerate(self.queue) if message[0] == "to_pinned"]


class DeviceState:
    """The device's memory (tensors by id), its streams and events, the ledger, and the first error a queued op
    raised."""

    def __init__(self) -> None:
        self.data: dict[int, torch.Tensor] = {}
        self.ledger = Ledger()
        self.error: str = ""  # as on a GPU, a queued op's error surfaces at the next transfer
        self.streams: dict[int, Stream] = {DEFAULT_STREAM: Stream("default")}
        self.current = DEFAULT_STREAM  # the stream the host queues on (torch.cuda.stream(s) changes it)
        self.events: dict[int, tuple[int, int]] = {}  # an event: (its stream, how far that stream must have run)
        self.polls: dict[tuple, int] = {}  # an event or stream a query found not done: how often (polling is a wait)
        self.made_on: dict[int, int] = {}  # a tensor: the stream that made it (where its memory is freed)
        self.layouts: dict[int, tuple] = {}  # a tensor an op makes: (shape, dtype), known before the op runs
        self.used_on: dict[int, set[int]] = {}  # record_stream: other streams that must run before it is freed
        self.releases: dict[tuple, tuple[int, Any]] = {}  # a freed tensor or buffer: streams still to reach it, drop
        self.freed_on: dict[int, str] = {}  # with side streams: a tensor freed, and on which stream
        self.pinned: dict[int, torch.Tensor] = {}  # pinned host buffers, in memory both processes share
        self.segments: dict[int, Any] = {}  # the host memory pinned buffers are blocks of (host_pool), as NumPy views
        self.released: list[int] = []  # pinned buffers freed since the last answer (told with it: blocks to reuse)
        self.pinned_used_on: dict[int, set[int]] = {}  # a pinned buffer: the streams a copy into or from it was queued on
        self.landed: list[int] = []  # pinned buffers a download landed in since the last answer (told with it)
        self.uploaded: list[int] = []  # uploads from pinned memory run since the last answer (told with it)

    # -- queues
    def enqueue(self, message: tuple, stream: int | None = None) -> None:
        queue = self.streams[self.current if stream is None else stream]
        queue.queue.append(message)
        queue.queued += 1

    def run_stream(self, sid: int, upto: int | None = None) -> None:
        """Run stream ``sid``'s queue, to its end or until ``upto`` messages have run in all."""
        # A wait ("await") runs the other stream only up to where it had been queued when the host asked for the
        # wait, so the recursion always goes back in the host's order: streams cannot wait on each other in a circle
        stream = self.streams[sid]
        while stream.queue and (upto is None or stream.ran < upto):
            message = stream.queue.popleft()
            stream.ran += 1
            try:
                run_queued(self, sid, message)
            except Exception as exc:  # noqa: BLE001 - reported at the next transfer, as a device error is
                self.fail(f"{message[0]}: {type(exc).__name__}: {exc}")

    def run_all(self) -> None:
        for sid in list(self.streams):
            self.run_stream(sid)

    def fail(self, error: str) -> None:
        self.error = self.error or error

    # -- data
    def pinned_view(self, view: Any) -> torch.Tensor:
        return self.pinned[view.pid].as_strided(view.shape, view.stride, view.offset)

    def arguments(self, sid: int, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """An op's arguments on the data. A tensor no stream has made yet, whose layout the host sent, is a race:
        the op reads what the memory held."""
        try:
            return on_the_device(args, self.data), on_the_device(kwargs, self.data)
        except KeyError:
            absent = [ref.id for ref in leaves((args, kwargs)) if isinstance(ref, Ref) and ref.id not in self.data]
            if not all(id_ in self.layouts for id_ in absent):
                raise
            self.missing(sid, (args, kwargs))
            data = {**self.data, **{id_: _what_memory_held(*self.layouts[id_]) for id_ in absent}}
            return on_the_device(args, data), on_the_device(kwargs, data)

    def run(self, sid: int, name: str, args: tuple, kwargs: dict, out_ids: list[int], layouts: Any = ()) -> Any:
        try:
            real_args, real_kwargs = self.arguments(sid, args, kwargs)
            out = resolve(name)(*real_args, **real_kwargs)
        except Exception as exc:  # noqa: BLE001 - reported at the next transfer, as a device error is
            self.fail(self.missing(sid, (args, kwargs)) or f"{name}: {type(exc).__name__}: {exc}")
            return None
        found = [out] if isinstance(out, torch.Tensor) else [t for t in leaves(out) if isinstance(t, torch.Tensor)]
        for id_, tensor in zip(out_ids, found):
            self.data[id_] = tensor
        return found

    def missing(self, sid: int, value: Any) -> str:
        """Why a tensor ``value`` names is not in memory when stream ``sid`` runs: a race, recorded; "" if none is
        missing."""
        for ref in leaves(value):
            if isinstance(ref, Ref) and ref.id not in self.data:
                here = self.streams[sid].name
                if ref.id in self.freed_on:
                    race = (f"{here} used a tensor freed on {self.freed_on[ref.id]} before {here} ran "
                            f"(tensor.record_stream({here}) keeps it until then)")
                else:
                    maker = self.streams[self.made_on.get(ref.id, sid)].name
                    race = (f"{here} used a tensor that {maker} had not made yet: no wait_stream or wait_event "
                            f"ordered {here} after it")
                self.race(sid, race)
                return race
        return ""

    def streams_state(self) -> dict[str, Any]:
        """For the watcher: the downloads queued and not run (by stream and place), and each tensor a
        ``record_stream`` holds for a stream that still has copies queued (its id: those streams' names)."""
        queued = {sid: stream.copies_queued() for sid, stream in self.streams.items()}
        held = {id_: [self.streams[sid].name for sid in sids if queued[sid]] for id_, sids in self.used_on.items()}
        return {"copies_queued": {(sid, n) for sid, places in queued.items() for n in places},
                "held": {id_: names for id_, names in held.items() if names}}

    def streams_log(self, log_start: int, races_start: int, freed: tuple[int, ...] = ()) -> dict[str, Any]:
        """For the watcher: the log and the races after their first entries, the streams made, and for each of
        ``freed`` how long the log was when the host let go of it."""
        return {"log": self.ledger.log[log_start:], "races": self.ledger.races[races_start:],
                "streams_made": self.ledger.streams_made,
                "frees": {id_: self.ledger.frees[id_] for id_ in freed if id_ in self.ledger.frees}}

    def race(self, sid: int, race: str) -> None:
        self.ledger.races.append(race)
        self.log(sid, "RACE", race)

    def log(self, sid: int | None, what: str, detail: str = "") -> None:
        """What the host asked of stream ``sid`` (None: all), in the words of chapter 2's simulated streams."""
        self.ledger.log.append((what, "all streams" if sid is None else self.streams[sid].name, detail))

    def transfer(self, sid: int, kind: str, ref: Ref, where: str, layout: tuple | None = None) -> Any:
        """``ref``'s data brought to the host, recorded as one transfer of ``kind``. Data no stream has made yet
        reads as what the memory held (the in-flight value), a race."""
        if self.error:
            raise RuntimeError(f"an op queued earlier failed on the device: {self.error}. As after a device-side "
                               "error on a GPU, every later transfer fails too: restart the kernel for a new device")
        tensor = self.data.get(ref.id)
        if tensor is None:
            if layout is None:
                raise RuntimeError(self.missing(sid, ref))
            self.missing(sid, ref)
            shape, dtype = layout[0], getattr(torch, layout[1])
            tensor = torch.full(shape, in_flight_value(dtype), dtype=dtype)
        self.ledger.record(kind, where, tensor.numel() * tensor.element_size())
        return pack(tensor)

    # -- frees, as the caching allocators make them: memory is reused only once every stream that may still use it
    # has run what it had queued when the host let go
    def free(self, ids: list[int]) -> None:
        """Device tensors the host dropped: back to the stream that made them, and to those record_stream named."""
        for id_ in ids:
            self.ledger.frees[id_] = len(self.ledger.log)
            streams = {self.made_on.pop(id_, DEFAULT_STREAM), *self.used_on.get(id_, ())}  # kept until forgotten
            self.free_after(("tensor", id_), streams, lambda sid, id_=id_: self.forget(sid, id_))

    def unpin(self, pid: int) -> None:
        """A pinned buffer the host dropped: freed once each stream that queued a copy into or from it has run what it
        had queued (CUDA's caching host allocator records an event on each such stream). Not every busy stream: one
        whose work no one ever waits for would keep every buffer, and the device would run out of them."""
        busy = [sid for sid in self.pinned_used_on.pop(pid, ()) if self.streams[sid].queue]
        self.free_after(("pinned", pid), busy, lambda sid: self._unmap(pid))

    def _unmap(self, pid: int) -> None:
        if self.pinned.pop(pid, None) is not None:
            self.released.append(pid)

    def free_after(self, key: tuple, streams: Any, drop: Any) -> None:
        """``drop(sid)`` once each of ``streams`` has reached a release marker queued now (at once if none)."""
        streams = list(streams)
        if not streams:
            drop(DEFAULT_STREAM)
            return
        self.releases[key] = (len(streams), drop)
        for sid in streams:
            self.enqueue(("release", key), sid)

    def release(self, sid: int, key: tuple) -> None:
        if key not in self.releases:  # freed twice (a forged free): the first release already dropped it
            return
        left, drop = self.releases.pop(key)
        if left > 1:
            self.releases[key] = (left - 1, drop)
        else:
            drop(sid)

    def forget(self, sid: int, id_: int) -> None:
        self.data.pop(id_, None)
        self.used_on.pop(id_, None)
        if len(self.streams) > 1:  # another stream may still use it: say so if it does
            self.freed_on[id_] = self.streams[sid].name


def _what_memory_held(shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    """Memory read before it was written, or after it was freed: on a GPU, whatever it held; here the in-flight value
    (:func:`synclab.syncs.in_flight_value`), so that it shows."""
    return torch.full(shape, in_flight_value(getattr(torch, dtype)), dtype=getattr(torch, dtype))


# what the host waits for: a message of one of these kinds runs what it waits on first
_WAITS = {"item", "tolist", "bool", "tensor-bounded slice", "data-dependent output size", "boolean-mask indexing",
          "blocking device-to-host copy", "synchronous host-to-device copy", "non_blocking copy into pageable memory",
          "print", "Stream.synchronize", "Event.synchronize", "torch.cuda.synchronize"}
_QUEUED = ("op", "to_pinned", "from_pinned")


def handle(state: DeviceState, message: tuple) -> Any:
    """One message from the reader's side, and its answer (sent back only where the message's frame says the host
    waits: :func:`serve`).

    The device runs what a stream queued only when the host waits on it (a read on that stream, a blocking copy, a
    synchronize, an event's): the latest a GPU could, so that every read of a buffer before its copy has landed,
    every pinned buffer refilled before its upload ran, and every stream that uses data without a wait, shows. A
    transfer's kind is recorded when the message comes: the host waited then."""
    verb = message[0]
    if verb == "batch":  # ("batch", [message, ...]): the last one answered where it is a question
        for queued in message[1][:-1]:
            try:
                handle(state, queued)
            except Exception:  # noqa: BLE001 - as when it came alone: no one waits for its answer
                pass
        return handle(state, message[1][-1]) if message[1] else None
    if verb in _QUEUED:
        if verb == "op":  # ("op", name, args, kwargs, out_ids, layouts): the host's work, counted when queued
            state.ledger.ops += 1
            for id_ in message[4]:
                state.made_on[id_] = state.current
            state.layouts.update(zip(message[4], message[5] if len(message) > 5 else ()))
        elif verb == "to_pinned":  # ("to_pinned", PinnedView, Ref)
            state.log(state.current, "copy to host", f"{list(message[1].shape)} non_blocking")
            state.pinned_used_on.setdefault(message[1].pid, set()).add(state.current)
        else:  # ("from_pinned", Ref, PinnedView, upload id)
            state.log(state.current, "copy to device", f"{list(message[2].shape)} non_blocking from pinned memory")
            state.pinned_used_on.setdefault(message[2].pid, set()).add(state.current)
        state.enqueue(message)
        return None
    if verb in _STREAMS:
        return _STREAMS[verb](state, *message[1:])
    if verb == "free":  # ("free", ids)
        state.free(message[1])
        return None
    if verb == "segment":  # ("segment", index, [bytes] uint8 in shared memory): host memory both processes map
        state.segments[message[1]] = message[2].numpy()  # kept alive by its NumPy view
        return None
    if verb == "pin":  # ("pin", pid, segment, offset, size, shape, dtype): a pinned buffer, a block of a segment
        _, pid, segment, offset, size, shape, dtype = message
        state.pinned[pid] = as_buffer(block_of(state.segments[segment], offset, size), shape, getattr(torch, dtype))
        return None
    if verb == "race":  # ("race", stream, what): the host saw it wrote a pinned buffer an upload still needs
        state.race(message[1], message[2])
        return None
    if verb == "unpin":  # ("unpin", pid): the host dropped it; freed once the streams that copied with it have run
        state.unpin(message[1])
        return None
    if verb in ("upload", "write", "count"):  # a synchronous one: copied on the current stream, which the host waits for
        kind, where, nbytes = (message[1], message[2], message[3]) if verb == "count" else \
            (message[3], message[4], len(message[2].data))
        if kind:
            state.ledger.record(kind, where, nbytes)
        if verb == "upload":
            state.made_on[message[1]] = state.current
        if verb != "count":
            state.enqueue(message)
        if kind in _WAITS:
            state.run_stream(state.current)
        return None
    if verb == "read":  # ("read", kind, Ref, where, (shape, dtype)): the current stream's work, then the copy
        state.run_stream(state.current)
        return state.transfer(state.current, *message[1:])
    if verb == "read_all":  # ("read_all", kind, [Ref], where, [(shape, dtype)]): blocking copies, one after another
        state.run_stream(state.current)
        return [state.transfer(state.current, message[1], ref, message[3], layout)
                      for ref, layout in zip(message[2], message[4])]
    if verb == "sync":  # ("sync", kind, where): torch.cuda.synchronize(), a wait for every stream
        state.run_all()
        state.ledger.record(message[1], message[2], 0)
        state.log(None, "host waits", "torch.cuda.synchronize")
        return None
    if verb == "sized":  # ("sized", kind, name, args, kwargs, out_ids, where, reads): an op whose output size is data
        _, kind, name, args, kwargs, out_ids, where, reads = message
        state.run_stream(state.current)
        state.ledger.ops += 1
        found = state.run(state.current, name, args, kwargs, out_ids)
        if found is None:
            raise RuntimeError(state.error)
        for id_ in out_ids[:len(found)]:
            state.made_on[id_] = state.current
        for _ in range(reads):  # the values the size is computed from cross, not the data
            state.ledger.record(kind, where, 8)
        return [(tuple(t.shape), tuple(t.stride()), t.storage_offset(), str(t.dtype).removeprefix("torch."))
                      for t in found]
    raise ValueError(f"the device process has no message {verb!r}")


def run_queued(state: DeviceState, sid: int, message: tuple) -> None:
    """One queued message, run when the host waits on its stream ``sid``."""
    verb = message[0]
    if verb == "op":  # ("op", name, args, kwargs, out_ids, layouts)
        state.run(sid, *message[1:])
    elif verb == "release":  # ("release", key): a tensor or pinned buffer the host dropped, this stream reached it
        state.release(sid, message[1])
    elif verb == "await":  # ("await", stream, how far): wait_event, as the stream reaches it
        state.run_stream(message[1], message[2])
    elif verb == "upload":  # ("upload", id, HostBytes, kind, where)
        state.data[message[1]] = on_the_device(message[2], state.data)
    elif verb == "write":  # ("write", Ref, HostBytes, kind, where): a host tensor copied into a device one
        state.data[message[1].id].copy_(on_the_device(message[2], state.data))
    elif verb == "to_pinned":  # ("to_pinned", PinnedView, Ref): a download lands in pinned memory
        state.landed.append(message[1].pid)
        target = state.pinned_view(message[1])
        if message[2].id in state.data:
            target.copy_(state.data[message[2].id])
        else:  # a stream copied data it was not ordered after: the buffer gets what that memory held
            state.missing(sid, message[2])
            target.fill_(in_flight_value(target.dtype))
    elif verb == "from_pinned":  # ("from_pinned", Ref, PinnedView, upload id): an upload reads pinned memory as it runs
        state.data[message[1].id].copy_(state.pinned_view(message[2]))
        state.uploaded.append(message[3])


# -- streams and events (chapter 2): each message names its stream or event by the id the reader's side gave it

def _new_stream(state: DeviceState, sid: int) -> Any:
    state.streams[sid] = Stream(f"side stream {sid}")
    state.ledger.streams_made += 1
    state.log(sid, "create stream")
    return None


def _use(state: DeviceState, sid: int) -> Any:
    state.current = sid
    return None


def _record(state: DeviceState, eid: int, sid: int) -> Any:
    stream = state.streams[sid]
    state.events[eid] = (sid, stream.queued)
    state.polls.pop(("event", eid), None)
    state.log(sid, "record event", f"after {len(stream.copies_queued())} queued copies")
    return None


def _wait_event(state: DeviceState, eid: int, sid: int) -> Any:
    """Stream ``sid`` runs nothing queued after this until the event's work has run (an unrecorded event: no wait)."""
    if eid not in state.events:
        state.log(sid, "wait_event", "an event never recorded: no wait")
        return None
    state.enqueue(("await", *state.events[eid]), sid)
    state.log(sid, "wait_event", f"waits for {state.streams[state.events[eid][0]].name} (an event recorded there)")
    return None


def _wait_stream(state: DeviceState, sid: int, other: int) -> Any:
    state.enqueue(("await", other, state.streams[other].queued), sid)
    state.log(sid, "wait_stream", f"waits for {state.streams[other].name}")
    return None


def _record_stream(state: DeviceState, tensor_id: int, sid: int, shape: list[int]) -> Any:
    state.used_on.setdefault(tensor_id, set()).add(sid)
    state.log(sid, "record_stream", f"{shape} kept until this stream's work is done")
    return None


def _sync_stream(state: DeviceState, sid: int, kind: str, where: str) -> Any:
    state.run_stream(sid)
    state.ledger.record(kind, where, 0)
    state.log(sid, "host waits", "Stream.synchronize")
    return None


def _sync_event(state: DeviceState, eid: int, kind: str, where: str, blocking: bool) -> Any:
    if eid in state.events:
        state.run_stream(*state.events[eid])
    state.ledger.record(kind, where, 0)
    detail = "Event.synchronize" + (" (blocking)" if blocking else "")  # the host sleeps; without, it spins
    if eid in state.events:
        state.log(state.events[eid][0], "host waits", detail)
    else:
        state.ledger.log.append(("host waits", "no stream", detail))
    return None


def _query(state: DeviceState, key: tuple, sid: int, upto: int | None, where: Any) -> bool:
    """Whether stream ``sid`` has run that far; no wait. The first look that finds work not done says False and
    runs nothing. A second look at the same thing finds it done: the host polled until then, a spin as real a wait
    as ``synchronize()`` (the busy-poll a blocking event avoids), counted as one."""
    stream = state.streams[sid]
    pending = len(stream.queue) if upto is None else max(0, upto - stream.ran)
    if not any(stream.queue[i][0] != "release" for i in range(pending)):  # a free is the allocator's, not work
        state.run_stream(sid, upto)
        return True
    state.polls[key] = state.polls.get(key, 0) + 1
    if state.polls[key] < 2:
        return False
    del state.polls[key]
    state.run_stream(sid, upto)
    state.ledger.record(SyncKind.EVENT_SYNC.value if key[0] == "event" else SyncKind.STREAM_SYNC.value, where, 0)
    state.log(sid, "host waits", f"{key[0].capitalize()}.query polled until the copies landed")
    return True


def _query_stream(state: DeviceState, sid: int, where: Any) -> Any:
    return _query(state, ("stream", sid), sid, None, where)


def _query_event(state: DeviceState, eid: int, where: Any) -> Any:
    return eid not in state.events or _query(state, ("event", eid), *state.events[eid], where)


_STREAMS = {"stream": _new_stream, "use": _use, "record": _record, "wait_event": _wait_event,
            "wait_stream": _wait_stream, "record_stream": _record_stream, "sync_stream": _sync_stream,
            "sync_event": _sync_event, "query_stream": _query_stream, "query_event": _query_event}
ASKS, TELLS = b"?", b"."  # the reader's messages start with one: whether the host waits for an answer


def serve(reader: Connection, watcher: Connection) -> None:
    """Answer the reader's side and the watcher until the watcher says stop or goes away (the counts outlive the
    reader's process: a grader reads them once the answer's process has ended)."""
    torch.set_num_threads(1)
    register_device_name()
    state = DeviceState()
    conns = [reader, watcher]
    while True:
        for conn in wait(conns):
            asks = False
            try:
                if conn is watcher:
                    message = conn.recv()
                else:  # the reader's: a byte that says whether the host waits for an answer, then the pickle
                    raw = conn.recv_bytes()
                    if raw[:1] not in (ASKS, TELLS):  # not framed by the reader's side: no op of its is lost
                        continue
                    asks = raw[:1] == ASKS
                    message = ForkingPickler.loads(memoryview(raw)[1:])
            except EOFError:  # the reader's process let go (it ended): the watcher may still read the counts
                if conn is watcher:
                    return
                conns.remove(reader)
                continue
            except Exception as exc:  # noqa: BLE001 - a message that cannot be read: the ops in it are lost
                state.fail(f"a message the device could not read: {type(exc).__name__}: {exc}")
                if asks:  # the host waits: it hears why
                    reader.send((RuntimeError(state.error), [], [], []))
                continue
            if conn is watcher:
                if message == ("stop",):
                    return
                if message == ("ledger",):
                    watcher.send(state.ledger)
                elif message == ("streams",):
                    watcher.send(state.streams_state())
                elif isinstance(message, tuple) and message[:1] == ("streams_log",):  # the log after its first n
                    watcher.send(state.streams_log(*message[1:]))
                elif message == ("count",):
                    watcher.send(len(state.ledger.transfers))
                elif isinstance(message, tuple) and message[:1] == ("since",):  # the transfers after the first n
                    watcher.send(state.ledger.transfers[message[1]:])
                continue
            try:
                answer = handle(state, message)
            except Exception as exc:  # noqa: BLE001 - the reader's side raises it where it asked
                answer = exc
            if asks:  # the frame says the host waits: answered, with the buffers downloads landed in and the
                # uploads run meanwhile (the host may read those buffers now, and write the uploads' sources)
                landed, uploaded, state.landed, state.uploaded = state.landed, state.uploaded, [], []
                released, state.released = state.released, []  # and the pinned buffers it no longer uses
                reader.send((answer, landed, uploaded, released))
