"""The reader's side of the device process: a tensor that holds only metadata, and the device it lives on.

Taught with chapter 0's sync table. A :class:`DeviceTensor` knows its shape, dtype, strides and device
(``simgpu:0``), which the host knows on a GPU too: each op on it is worked out on meta tensors here (so shapes and
dtypes are the ones torch gives, and a shape error is raised at once, as CUDA raises it on the host), then queued
to the device process, which runs it on the data. A value reaches this process only when it asks for it: ``item``,
``tolist``, ``bool``, ``print``, a copy to the host, or an op whose output size depends on the data (``nonzero``).
Each is a transfer the device process performs and counts, with the line of the reader's code that asked.
"""

from __future__ import annotations

import functools
import itertools
import math
import multiprocessing
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable

import torch
import torch.multiprocessing  # noqa: F401 - pinned memory's segments cross as shared memory (its reductions)
from torch.utils._pytree import tree_flatten, tree_unflatten

from synclab.sim.device_process.factories import register as register_factories
from synclab.sim.device_process.host_pool import HostPool, as_buffer, block_of
from synclab.sim.device_process.ledger import Ledger, Transfer
from synclab.sim.device_process.server import ASKS, DEFAULT_STREAM, TELLS, serve
from synclab.sim.device_process.streams import Event, Stream, using
from synclab.sim.device_process.wire import (DEVICE_TYPE, PinnedView, Ref, leaves, mapped, op_name, pack,
                                             reader_line, register_device_name, unpack)
from synclab.device import TORCH_METHODS_OF_THE_DEVICE
from synclab.device import copies_as_they_lie
from synclab.syncs import ALIASED_WRITE, SyncKind, _overlaps, attribute_syncs_to_callers, in_flight_value

attribute_syncs_to_callers(__file__)

aten = torch.ops.aten
_OUTBOX_LIMIT = 256
_STARTED: list["SimulatedGPU"] = []


def current_gpu() -> "SimulatedGPU":
    """The simulated GPU started last: a factory given the device's name makes its tensor there."""
    if not _STARTED:
        raise RuntimeError(f"no simulated GPU is running: start one (SimulatedGPU()) before using device {DEVICE_TYPE!r}")
    return _STARTED[-1]


# ops whose output's size is the data's: the host must learn it before it can name the output
_SIZED_BY_DATA = {aten.nonzero.default: SyncKind.NONZERO, aten.masked_select.default: SyncKind.NONZERO,
                  aten._unique2.default: SyncKind.NONZERO, aten.unique_consecutive.default: SyncKind.NONZERO,
                  aten.unique_dim.default: SyncKind.NONZERO, aten.repeat_interleave.Tensor: SyncKind.NONZERO,
                  aten.bincount.default: SyncKind.NONZERO, aten._to_sparse.default: SyncKind.NONZERO}


def _reads_for_size(func: Any, args: tuple, kwargs: dict) -> int:
    """How many values ATen's CUDA kernel reads back to size ``func``'s output (a transfer each): bincount reads
    min() (negatives are refused) and max(), none for an empty input; repeat_interleave reads the total, then
    checks that no repeat is negative, none when given ``output_size``."""
    if func is aten.bincount.default:
        return 2 if args[0].numel() else 0
    if func is aten.repeat_interleave.Tensor:
        return 0 if kwargs.get("output_size") is not None else 2
    return 1
# Python-level reads: the method's name, the kind of transfer it makes
_READS = {"tolist": SyncKind.TOLIST, "item": SyncKind.ITEM, "__bool__": SyncKind.BOOL, "__int__": SyncKind.ITEM,
          "__float__": SyncKind.ITEM, "__repr__": SyncKind.PRINT, "__format__": SyncKind.PRINT,
          "numpy": SyncKind.D2H_COPY}


@dataclass(frozen=True)
class _QueuedUpload:
    """An upload from pinned memory the device has not run yet, as the host queued it (chapter 3)."""

    source: torch.Tensor  # the pinned host tensor it reads when it runs: held until then, as CUDA's caching host
    #                       allocator holds a freed pinned block until the copies queued with it have run (and a write
    #                       just before the host dropped the buffer is still seen)
    version: int  # the source's version then: a host write into it (or a view of it) bumps it
    where: str  # the reader's line that queued it
    stream: int  # the stream it was queued on


class Watcher:
    """The device process's counts, read over a connection of their own, which the process that started the device
    keeps: the reader's connection has no message that reads them or lowers them. Handed only the reader's end (a
    grader's answer process), code cannot reach them."""

    def __init__(self, conn: Connection, process: multiprocessing.process.BaseProcess) -> None:
        self._conn, self.process = conn, process

    def ask(self, question: tuple) -> Any:
        self._conn.send(question)
        return self._conn.recv()

    def stop(self) -> None:
        if self.process.is_alive():
            self._conn.send(("stop",))
            self.process.join(timeout=10)


def start_device() -> tuple[Connection, Watcher]:
    """A device process: the reader's end of its connection, and its watcher."""
    context = multiprocessing.get_context("spawn")
    reader, device_end = context.Pipe()
    watch, watch_end = context.Pipe()
    process = context.Process(target=serve, args=(device_end, watch_end), daemon=True, name="synclab-simulated-gpu")
    process.start()
    device_end.close()
    watch_end.close()
    return reader, Watcher(watch, process)


class SimulatedGPU:
    """The device: its process, the reader's connection to it, and the watcher's (``ledger``)."""

    def __init__(self, reader: Connection | None = None) -> None:
        """Start a device process and hold both its connections; or, given ``reader`` (the reader's end of one another
        process started, :func:`start_device`), only the reader's: that process keeps the watcher, and the counts."""
        register_device_name()
        if reader is None:
            reader, self._watcher = start_device()
            self.process: multiprocessing.process.BaseProcess | None = self._watcher.process
        else:
            self._watcher, self.process = None, None
        self._conn = reader
        self._ids = itertools.count(1)
        self._outbox: list[tuple] = []
        self._sent = 0  # messages sent on the reader's connection: the device's state changes only with one
        self._watched: dict[tuple, tuple[int, Any]] = {}  # a watcher's question: the messages sent then, its answer
        self.freed: list[int] = []  # ids of tensors the reader's side dropped, sent with the next batch
        self._pinned: dict[int, tuple[int, torch.UntypedStorage]] = {}  # a pinned buffer's address: its id, memory
        self._host_pool = HostPool()  # the blocks pinned buffers are made in
        self._blocks: dict[int, tuple[int, int, int]] = {}  # a pinned buffer's id: its block, until the device frees it
        self.in_flight: dict[int, int] = {}  # a pinned buffer's id: downloads into it queued and not yet landed
        self._uploads_queued: dict[int, _QueuedUpload] = {}  # uploads from pinned memory the device has not run yet
        self.device = torch.device(DEVICE_TYPE, 0)
        self._default_stream = Stream(self, sid=DEFAULT_STREAM)
        self._current_stream = self._default_stream
        _STARTED.append(self)  # the device that torch.empty(..., device="simgpu") and the like make tensors on
        register_factories(current_gpu)

    # -- the reader's side: ops are queued here and go in one message with the next question (or every
    # _OUTBOX_LIMIT ops), as a driver batches launches; a question is answered after everything queued before it
    def send(self, message: tuple) -> None:
        self._outbox.append(message)
        if len(self._outbox) >= _OUTBOX_LIMIT:
            self.flush()

    def flush(self, question: tuple | None = None) -> None:
        """Send what is queued, with ``question`` last when one is asked (one message: one write, one wake-up)."""
        self._name_refilled_buffers()
        self._unpin_the_dropped()
        freed, self.freed = self.freed, []  # appended to by finalizers, which may run in the middle of a send
        if freed:
            self._outbox.append(("free", freed))
        if question is not None:
            self._outbox.append(question)
        if self._outbox:
            batch, self._outbox = self._outbox, []
            self._send(("batch", batch), asks=question is not None)

    def _send(self, message: tuple, asks: bool = False) -> None:
        """``message``, marked ahead of its pickle by whether the host waits for an answer: a message the device
        cannot read (a pinned buffer it could not map) is still answered, with the error, when it asks."""
        self._sent += 1  # what the watcher read before is stale from here on
        with torch._C.DisableTorchFunction():  # pickling a pinned buffer calls torch: the driver's work, not the host's
            self._conn.send_bytes((ASKS if asks else TELLS) + bytes(ForkingPickler.dumps(message)))

    def ask(self, message: tuple) -> Any:
        self.flush(message)
        answer, landed, uploaded, released = self._conn.recv()
        for pid in released:  # the device no longer uses its block: free for the next buffer
            self._host_pool.release(*self._blocks.pop(pid))
        for upload in uploaded:  # run: a host write into its source from now on is no race
            self._uploads_queued.pop(upload, None)
        for pid in landed:
            self.in_flight[pid] -= 1
            if not self.in_flight[pid]:
                del self.in_flight[pid]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def lands_later(self, pid: int) -> None:
        """A download into pinned buffer ``pid`` was queued: until the device says it landed, reading the buffer
        reads what the memory held (an early read, which ``count_syncs`` names)."""
        self.in_flight[pid] = self.in_flight.get(pid, 0) + 1

    def in_flight_buffer(self, host: torch.Tensor) -> bool:
        """Whether ``host`` lies in a pinned buffer a queued download has not landed in yet."""
        view = self.pinned_view(host)
        return view is not None and self.in_flight.get(view.pid, 0) > 0

    def write(self, target: "DeviceTensor", host: torch.Tensor, non_blocking: bool) -> None:
        """``target.copy_(host)``: the host's values go up. A synchronous copy, unless ``non_blocking``: then from
        pinned memory the device reads the buffer when it runs the copy (no wait), from pageable memory the host
        first stages it (a staging copy)."""
        view = self.async_view(host, target) if non_blocking else None
        if view is not None:
            upload = self.new_id()
            self._uploads_queued[upload] = _QueuedUpload(host, host._version, reader_line(),
                                                         self._current_stream.sid)
            self.send(("from_pinned", Ref(target._id), view, upload))
            return
        kind = SyncKind.STAGED_COPY if non_blocking else SyncKind.H2D_COPY
        self.send(("write", Ref(target._id), pack(host.expand(target.shape)), kind.value, reader_line()))

    def _name_refilled_buffers(self) -> None:
        """A host write into the pinned source of an upload the device has not run yet: the device reads the new
        values, a race, told to the device (which records it) before anything that could run the upload. Every
        write to a tensor bumps its version, shared by all its views; the device says with each answer which
        uploads it ran."""
        for upload, queued in list(self._uploads_queued.items()):
            if queued.source._version != queued.version:
                del self._uploads_queued[upload]
                self._outbox.append(("race", queued.stream, f"the host wrote a pinned buffer before its upload ran "
                                     f"(queued at {queued.where}); the device may read the new values"))

    def pinned(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float32, fill: float | bool = 0) -> torch.Tensor:
        """A pinned host buffer (of ``fill``): host memory the device process maps too, so a non_blocking copy into
        it lands when the device runs it, and one from it reads it then, as on CUDA."""
        self._unpin_the_dropped()
        segment, offset, size, new = self._host_pool.allocate(math.prod(shape) * dtype.itemsize)
        if new is not None:  # a segment crosses once (its file); a block of it is named by its place
            self.send(("segment", segment, new))
        buffer = as_buffer(block_of(self._host_pool.arrays[segment], offset, size), tuple(shape), dtype).fill_(fill)
        storage = buffer.untyped_storage()
        pid = self.new_id()
        self._pinned[storage.data_ptr()] = (pid, storage)
        self._blocks[pid] = (segment, offset, size)
        self.send(("pin", pid, segment, offset, size, tuple(shape), _dtype_name(dtype)))
        return buffer

    def _unpin_the_dropped(self) -> None:
        """Pinned buffers no host tensor holds any more (only this table does): freed in both processes, in the
        device process once the copies queued before the free have run (the caching host allocator's rule)."""
        dropped = [address for address, (_, storage) in self._pinned.items()
                   if torch._C._storage_Use_Count(storage._cdata) == 1]
        for address in dropped:
            pid, _ = self._pinned.pop(address)
            self._outbox.append(("unpin", pid))  # sent with what is queued (flush calls this too)

    def pinned_view(self, host: torch.Tensor) -> PinnedView | None:
        """``host``'s place in a pinned buffer, or None for pageable memory."""
        found = self._pinned.get(host.untyped_storage().data_ptr())
        if found is None:
            return None
        return PinnedView(found[0], tuple(host.shape), tuple(host.stride()), host.storage_offset())

    def async_view(self, host: torch.Tensor, device_side: "DeviceTensor") -> PinnedView | None:
        """``host``'s place in a pinned buffer where a ``non_blocking`` copy between it and ``device_side`` runs
        without the host: pinned, and copied as it lies. CUDA copies a view with gaps (``pinned[:, :n]``), or one laid
        out unlike the device side, through a contiguous temporary of its own, in pageable memory (chapter 3;
        :func:`synclab.device.copies_as_they_lie`)."""
        return self.pinned_view(host) if copies_as_they_lie(host, device_side) else None

    def synchronize(self) -> None:
        """``torch.cuda.synchronize()``: the host waits until the device has run everything queued, on every
        stream."""
        self.ask(("sync", SyncKind.DEVICE_SYNC.value, reader_line()))

    # -- streams and events (chapter 2), as torch.cuda names them
    def Stream(self) -> Stream:  # noqa: N802 - torch.cuda.Stream's name
        """A new side stream."""
        return Stream(self)

    def Event(self, **flags: bool) -> Event:  # noqa: N802 - torch.cuda.Event's name
        return Event(self, **flags)

    def stream(self, stream: Stream | None) -> Any:
        """``torch.cuda.stream(s)``: a context in which work is queued on ``s``."""
        return using(self, stream)

    def current_stream(self) -> Stream:
        return self._current_stream

    def default_stream(self) -> Stream:
        return self._default_stream

    def use(self, stream: Stream) -> None:
        """Queue what follows on ``stream``."""
        if stream != self._current_stream:
            self._current_stream = stream
            self.send(("use", stream.sid))

    def tensor_for(self, meta: torch.Tensor, view_of: "DeviceTensor | None" = None) -> "DeviceTensor":
        """A new device tensor with ``meta``'s metadata and a new id (its data made by the op queued next); a view
        shares ``view_of``'s memory."""
        out = DeviceTensor(self, meta, self.new_id())
        if view_of is not None:
            out._storage = view_of._storage
        return out

    def new_id(self) -> int:
        return next(self._ids)

    def upload(self, host: torch.Tensor, *, blocking: bool = True) -> "DeviceTensor":
        """``host`` copied to a new device tensor: a synchronous host-to-device copy, or with ``blocking=False`` one
        queued and not counted (the tests' way to put data on the device without a transfer of their own)."""
        out = self.tensor_for(torch.empty_like(host, device="meta"))
        self.send(("upload", out._id, pack(host), SyncKind.H2D_COPY.value if blocking else "", reader_line()))
        return out

    # -- the watcher's side: the counts, which the reader's connection cannot reach
    def _watch(self, question: tuple) -> Any:
        if self._watcher is None:
            raise RuntimeError("this process holds only the reader's end of the simulated GPU: its counts are read by "
                               "the process that started it, as a GPU's driver, not the program, sees its transfers")
        self.flush()  # in this process the two sides meet; a grader's watcher sees what the reader has sent
        return self._watcher.ask(question)

    def ledger(self) -> Ledger:
        """A copy of the device process's ledger: its transfers, ops, streams, log and races."""
        return self._watch(("ledger",))

    def transfers_since(self, start: int) -> list[Transfer]:
        """The transfers after the first ``start`` (``count_syncs`` reads its block's this way)."""
        return self._watch(("since", start))

    def streams_state(self) -> dict[str, Any]:
        """The copies queued on the streams and not run yet, and the tensors ``record_stream`` holds
        (:class:`~.streams_seen.StreamsSeen` reads them)."""
        return self._watch_unchanged(("streams",))

    def streams_log(self, log_start: int = 0, races_start: int = 0, freed: tuple[int, ...] = ()) -> dict[str, Any]:
        """The streams' log and races after their first entries, the streams made, and where in the log the host
        let go of each tensor of ``freed`` (its id)."""
        return self._watch_unchanged(("streams_log", log_start, races_start, tuple(freed)))

    def _watch_unchanged(self, question: tuple) -> Any:
        """The watcher's answer to ``question``, asked again only once the reader's side has sent something since:
        a check reads the streams many times between two steps (each read a round trip)."""
        self.flush()
        sent, answer = self._watched.get(question, (-1, None))
        if sent != self._sent:
            answer = self._watch(question)
            self._watched[question] = (self._sent, answer)
        return answer

    def download_all(self, tensors: list["DeviceTensor"]) -> list[torch.Tensor]:
        """Each of ``tensors`` copied to the host: that many blocking copies, each counted as ``t.to("cpu")`` is, at
        the reader's line, answered in one round trip (a check reading many outputs back:
        :func:`synclab.device.read_back_together`)."""
        packed = self.ask(("read_all", SyncKind.D2H_COPY.value, [Ref(t._id) for t in tensors], reader_line(),
                           [_layout_of(t) for t in tensors]))
        return [unpack(p) for p in packed]

    def transfer_count(self) -> int:
        """How many transfers the device process has counted so far."""
        return self._watch(("count",))

    def close(self) -> None:
        """Stop the device process, where this process started it; else let go of the reader's end (the process
        that started the device stops it)."""
        if self in _STARTED:
            _STARTED.remove(self)
        if self._watcher is not None:
            self._watcher.stop()
        else:
            self.flush()
            self._conn.close()


def _read_kind(name: str) -> SyncKind:
    if name == "__index__":
        return SyncKind.TENSOR_SLICE if _IN_INDEXING[0] else SyncKind.ITEM
    return _READS[name]


def _a_mode_sees_calls() -> bool:
    """Whether a torch-function mode that looks at calls is on: any but the machine's own, which takes over only a
    factory's ``pin_memory`` flag and einsum (``sees_no_calls``), and would only cost an indexing a second pass."""
    if not torch._C._is_torch_function_mode_enabled():
        return False
    return torch._C._len_torch_function_stack() != 1 or \
        not getattr(torch._C._get_function_stack_at(0), "sees_no_calls", False)


def _read_method(name: str) -> Callable[..., Any]:
    """A read as a method of :class:`DeviceTensor` (``t.tolist()``, ``int(t)``, ...)."""
    def method(self: "DeviceTensor", *rest: Any, **_: Any) -> Any:
        if _a_mode_sees_calls():  # a mode sees the call, as it sees a CUDA tensor's
            return torch.overrides.handle_torch_function(getattr(DeviceTensor, name), (self,), self, *rest)
        return _read(self, _read_kind(name), name, rest)
    method.__name__ = name
    TORCH_METHODS_OF_THE_DEVICE.add(method.__code__)
    return method


class DeviceTensor(torch.Tensor):
    """A tensor on the device process: metadata here, data there."""

    @staticmethod
    def __new__(cls, gpu: SimulatedGPU, meta: torch.Tensor, id_: int) -> "DeviceTensor":
        # its sizes and strides are its own, as a CUDA tensor's: torch reads them without a call here (a policy
        # asking the meta tensor made each slice cost ~10x). An op that changes them in place: see `relaid`
        out = _wrapper(cls, gpu, meta)
        out._gpu, out._meta, out._id, out._key = gpu, meta, id_, _meta_key(meta)
        out._storage = id_  # the memory it lives in: its own, or its base's for a view (CUDA's overlap checks)
        weakref.finalize(out, _free, weakref.ref(gpu), id_)
        return out

    # No torch function of its own: torch treats it as it treats a CUDA tensor (a mode counting the host's torch
    # calls sees what it sees there, no more: ``t.shape`` is not a call). Only the reads and indexing differ, below
    __torch_function__ = torch._C._disabled_torch_function_impl

    def __getitem__(self, index: Any) -> Any:
        if _a_mode_sees_calls():  # a mode sees the call from the reader's line, as on CUDA
            return torch.overrides.handle_torch_function(DeviceTensor.__getitem__, (self,), self, index)
        _IN_INDEXING[0] += 1  # a 0-d device bound read inside is a tensor-bounded slice
        try:
            return torch.Tensor.__getitem__(self, index)
        finally:
            _IN_INDEXING[0] -= 1

    def __setitem__(self, index: Any, value: Any) -> None:
        if _a_mode_sees_calls():
            return torch.overrides.handle_torch_function(DeviceTensor.__setitem__, (self,), self, index, value)
        if isinstance(value, (bool, int, float)):
            # torch's setitem makes a Python number a 0-d host tensor when the target is a CUDA tensor (not for
            # other devices): x[i] = v then copies it over (a synchronous upload), x[i:j] = v fills with it
            value = torch.tensor(value, dtype=self.dtype)
        _IN_INDEXING[0] += 1
        try:
            torch.Tensor.__setitem__(self, index, value)
        finally:
            _IN_INDEXING[0] -= 1

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in _METADATA:  # a size, stride or offset: the host knows it, from the meta tensor
            return _METADATA[func](args[0]._meta)
        if func is aten._has_compatible_shallow_copy_type.default:  # `relaid` asks it: a question of types
            return all(isinstance(t, DeviceTensor) for t in args)
        flat = list(leaves((args, kwargs)))  # the arguments, flattened once for every question below
        gpu = next(t._gpu for t in flat if isinstance(t, DeviceTensor))
        if func is aten._local_scalar_dense.default:
            return _read(args[0], SyncKind.TENSOR_SLICE if _IN_INDEXING[0] else SyncKind.ITEM, "item", ())
        if func is aten.equal.default:
            return _equal(*args)
        if func in (aten._to_copy.default, aten.copy_.default) and _to_host(func, args, kwargs):
            return _copy_to_host(func, args, kwargs)
        if func is aten.copy_.default and not isinstance(args[1], DeviceTensor):  # an upload into a device tensor
            gpu.write(args[0], args[1], bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking")))
            return args[0]
        _uploads_or_refuses(gpu, func, args, flat)
        if func in _SIZED_BY_DATA and not (func is aten.repeat_interleave.Tensor and kwargs.get("output_size")):
            return _sized_by_data(gpu, func, args, kwargs, _SIZED_BY_DATA[func], _reads_for_size(func, args, kwargs))
        if func in _INDEXING and func is not aten.index.Tensor and isinstance(args[2], DeviceTensor) \
                and _overlaps(args[0], args[2]):
            raise RuntimeError(ALIASED_WRITE)
        if func in _INDEXING and _mask_indices(func, args) and not _masked_fill(func, args):
            # ATen turns a boolean mask into indices (a nonzero, sized by the data) before it writes through them
            gpu.send(("count", SyncKind.BOOL_MASK_INDEX.value, reader_line(), 8))
        outputs = _outputs(func, args, kwargs)
        if outputs is None:  # torch's meta kernels know no size for it: a boolean mask's, say
            return _sized_by_data(gpu, func, args, kwargs, SyncKind.BOOL_MASK_INDEX)
        spec, out_leaves = outputs
        inputs = [t for t in flat if isinstance(t, torch.Tensor)]
        base = args[0] if _makes_views(func) and isinstance(args[0], DeviceTensor) else None
        out_ids, wrapped = [], []
        for leaf in out_leaves:
            if isinstance(leaf, _Input):  # in place: the same tensor comes back
                if leaf.after is not None and _layout(inputs[leaf.position]) != _layout(leaf.after):
                    relaid(inputs[leaf.position], leaf.after.meta())  # resize_, an out= op: its new size
                wrapped.append(inputs[leaf.position])
                out_ids.append(inputs[leaf.position]._id)
            elif isinstance(leaf, _New):
                wrapped.append(gpu.tensor_for(leaf.meta(), view_of=base))
                out_ids.append(wrapped[-1]._id)
            else:
                wrapped.append(leaf)
        layouts = [(tuple(t.shape), _dtype_name(t.dtype)) for t in wrapped if isinstance(t, DeviceTensor)]
        gpu.send(("op", op_name(func), _on_the_wire(args), _on_the_wire(kwargs), out_ids, layouts))
        return wrapped[0] if spec is None else tree_unflatten(wrapped, spec)

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # print(t) and f"{t}" read the values
        return _read(self, SyncKind.PRINT, "__repr__", ())

    # The reads: methods (torch refuses tolist() on a subclass, and would read item() at the dispatch level without
    # its kind). Each goes through an active torch-function mode first, as torch's own methods do, so that a mode
    # counting the host's torch calls sees it
    tolist = _read_method("tolist")
    item = _read_method("item")
    __bool__ = _read_method("__bool__")
    __int__ = _read_method("__int__")
    __float__ = _read_method("__float__")
    __index__ = _read_method("__index__")  # a slice's bound inside x[...]; elsewhere (a list's index) an item
    __format__ = _read_method("__format__")
    numpy = _read_method("numpy")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:  # np.asarray(t): refused, nothing read
        return _read(self, SyncKind.D2H_COPY, "numpy", ())

    def __dlpack_device__(self) -> tuple[int, int]:  # where the data is: CUDA's answer (kDLCUDA, device 0)
        return (2, 0)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:  # np.from_dlpack(t): device memory, refused unread
        raise BufferError("Unsupported device in DLTensor.")

    def __contains__(self, element: Any) -> bool:  # 3 in t: compared on the device, the answer read (a bool)
        return _read(torch.eq(self, element).any(), SyncKind.BOOL, "__bool__", ())

    def __reduce_ex__(self, protocol: int) -> Any:  # pickle.dumps(t): torch saves the storage through a host copy
        return (_uploaded, (_read(self, SyncKind.D2H_COPY, "cpu", ()),))

    def untyped_storage(self) -> "_Storage":  # type: ignore[override]
        return _Storage(self)

    def data_ptr(self) -> int:  # type: ignore[override]  # a device address: no transfer, as on CUDA
        return (self._storage << _ADDRESS_BITS) + self.storage_offset() * self.element_size()

    def record_stream(self, stream: Stream) -> None:  # type: ignore[override]
        """This tensor is used on ``stream`` too: its memory is freed once that stream has run what it queued so
        far, not only its own stream (the caching allocator's rule)."""
        self._gpu.send(("record_stream", self._id, stream.sid, list(self.shape)))


def _wrapper(cls: type, gpu: SimulatedGPU, meta: torch.Tensor) -> Any:
    return torch.Tensor._make_wrapper_subclass(cls, meta.shape, strides=meta.stride(), dtype=meta.dtype,
                                               storage_offset=meta.storage_offset(), device=gpu.device,
                                               requires_grad=False)


def relaid(tensor: DeviceTensor, meta: torch.Tensor) -> None:
    """``tensor`` now has ``meta``'s sizes, strides and offset (an op resized it in place): the same object, as
    torch's ``resize_`` keeps it, its metadata swapped as ``t.data = ...`` swaps a parameter's."""
    with torch._C.DisableTorchFunction():  # the reader's modes see its calls, not this bookkeeping
        tensor.data = _wrapper(DeviceTensor, tensor._gpu, meta)
    tensor._meta, tensor._key = meta, _meta_key(meta)


def einsum_as_one_op(equation: str, operands: tuple) -> Any:
    """``torch.einsum(equation, *operands)`` (or with the operands as one list) on device tensors, queued as one op;
    None where it is not one: an operand that is no tensor, or no device tensor among them."""
    tensors = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors) \
            or not any(isinstance(t, DeviceTensor) for t in tensors):
        return None
    return DeviceTensor.__torch_dispatch__(aten.einsum.default, (), (equation, tensors), {})


@functools.cache
def _makes_views(func: Any) -> bool:
    """Whether ``func``'s outputs are views of its first argument (its schema's returns carry an alias); asked once
    per op (a step dispatches the same few hundred ops thousands of times)."""
    return any(r.alias_info is not None for r in func._schema.returns)


_IN_INDEXING = [0]  # > 0 inside x[...] or x[...] = v: a device value read there is a slice's bound


def _equal(a: "DeviceTensor", b: torch.Tensor) -> bool:
    """``torch.equal``: answered from the metadata where it can be (other shapes, or the same memory), else as
    CUDA's kernel does it: compare on the device, then read the answer back (an item)."""
    if a.shape != b.shape:
        return False
    if isinstance(b, DeviceTensor) and a._id == b._id and _layout(a._meta) == _layout(b._meta):
        return True
    return _read(torch.eq(a, b).all(), SyncKind.ITEM, "item", ())


def _uploaded(host: torch.Tensor) -> "DeviceTensor":
    """A pickled device tensor, loaded: its values uploaded to the GPU started last (a synchronous copy)."""
    return host.to(current_gpu().device)


_ADDRESS_BITS = 40  # a device address: the memory's id above these bits, the byte offset below


class _Storage:
    """``t.untyped_storage()`` of a device tensor: where it lives (``data_ptr()``, a device address, read from the
    metadata), and its bytes, each read back by itself (one transfer per byte, as CUDA's storage reads are)."""

    def __init__(self, tensor: DeviceTensor) -> None:
        self._tensor = tensor

    def data_ptr(self) -> int:
        return self._tensor._storage << _ADDRESS_BITS

    def __len__(self) -> int:
        return self._tensor.numel() * self._tensor.element_size()

    def nbytes(self) -> int:
        return len(self)

    def __getitem__(self, i: int) -> int:
        data = self._tensor.reshape(-1).view(torch.uint8)  # [nbytes] on the device
        return _read(data[i], SyncKind.ITEM, "item", ())

    def tolist(self) -> list[int]:
        return [self[i] for i in range(len(self))]


TORCH_METHODS_OF_THE_DEVICE.update({DeviceTensor.__getitem__.__code__, DeviceTensor.__setitem__.__code__})


def _free(gpu_ref: "weakref.ref[SimulatedGPU]", id_: int) -> None:
    gpu = gpu_ref()
    if gpu is not None:
        gpu.freed.append(id_)  # no send here: a finalizer may run inside one


_METADATA = {aten.sym_size.default: lambda m: m.shape, aten.sym_stride.default: lambda m: m.stride(),
             aten.sym_storage_offset.default: lambda m: m.storage_offset(), aten.sym_numel.default: lambda m: m.numel(),
             aten.dim.default: lambda m: m.dim()}


@dataclass(frozen=True)
class _Input:
    position: int  # among the op's tensor arguments, flattened
    after: "_New | None" = None  # its metadata after the op, where the op changed it (resize_, an out= op)


@dataclass(frozen=True)
class _New:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype

    @functools.cache  # noqa: B019 - a layout's _New lives as long as the op cache that holds it
    def meta(self) -> torch.Tensor:
        """A meta tensor of this layout: one per cached op, shared by the tensors it makes (nothing changes a
        tensor's meta tensor in place: an op's meta kernel runs on copies, and `relaid` swaps in a new one)."""
        return self.fresh()

    def fresh(self) -> torch.Tensor:
        extent = self.offset + 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride)) if all(self.shape) else 0
        return torch.empty(extent, dtype=self.dtype, device="meta").as_strided(self.shape, self.stride, self.offset)


# An op's outputs by its signature (the op, its tensors' metadata, its other arguments): a step repeats the same ops
# on the same shapes, and torch's meta kernels for pointwise ops are Python (hundreds of microseconds each)
_OUTPUTS: dict[tuple, tuple[Any, list]] = {}


def _meta_key(meta: torch.Tensor) -> tuple:
    """A device tensor's part of an op's signature, worked out once per tensor."""
    return ("T", tuple(meta.shape), meta.stride(), meta.dtype, meta.storage_offset(), meta.device.type)


def _signature(value: Any) -> Any:
    if isinstance(value, DeviceTensor):
        return value._key
    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), value.stride(), value.dtype, value.storage_offset(), value.device.type)
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_signature(v) for v in value))
    if isinstance(value, dict):
        return (dict, tuple((k, _signature(v)) for k, v in value.items()))
    hash(value)  # an unhashable argument: no signature, the meta kernel runs
    return (type(value), value)


def _outputs(func: Any, args: tuple, kwargs: dict) -> tuple[Any, list] | None:
    """The op's output structure and leaves (:class:`_Input`, :class:`_New` or a plain value); None when its size
    is the data's."""
    try:
        key = (func, _signature(args), _signature(kwargs))
    except TypeError:
        key = None
    if key is not None and key in _OUTPUTS:
        return _OUTPUTS[key]
    # the meta kernel runs on copies: a device tensor's meta tensor may be shared, and an op may change its input
    copies = {id(t): _New(*_layout(t._meta), t.dtype).fresh() for t in leaves((args, kwargs))
              if isinstance(t, DeviceTensor)}
    metas = [copies[id(t)] if isinstance(t, DeviceTensor) else t for t in leaves((args, kwargs))
             if isinstance(t, torch.Tensor)]
    before = [_layout(m) for m in metas]  # an op that resizes an input changes these in place
    try:
        with torch._C.DisableTorchFunction():  # the reader's torch-function modes are for its calls, not torch's own
            out = func(*_as_meta(args, copies), **_as_meta(kwargs, copies))
    except NotImplementedError:
        return None
    flat, spec = tree_flatten(out)
    positions = {id(m): i for i, m in enumerate(metas)}
    found = (None if isinstance(out, torch.Tensor) else spec,  # None: one tensor, returned as it is
             [_Input(positions[id(v)], _New(*_layout(v), v.dtype) if _layout(v) != before[positions[id(v)]] else None)
              if isinstance(v, torch.Tensor) and id(v) in positions
              else _New(*_layout(v), v.dtype) if isinstance(v, torch.Tensor)
              else v for v in flat])
    if key is not None:
        _OUTPUTS[key] = found
    return found


def _layout(t: "torch.Tensor | _New") -> tuple[tuple[int, ...], tuple[int, ...], int]:
    if isinstance(t, _New):
        return t.shape, t.stride, t.offset
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def _as_meta(value: Any, copies: dict[int, torch.Tensor]) -> Any:
    def meta(v: Any) -> Any:
        if isinstance(v, DeviceTensor):
            return copies[id(v)]
        if isinstance(v, torch.Tensor):
            return v.to("meta")  # a host tensor in a device op: its values go up with the op
        if isinstance(v, torch.device) and v.type == DEVICE_TYPE:
            return torch.device("meta")
        return v
    return mapped(meta, value)


def _on_the_wire(value: Any) -> Any:
    return mapped(lambda v: Ref(v._id) if isinstance(v, DeviceTensor) else pack(v) if isinstance(v, torch.Tensor)
                    else v, value)


def _layout_of(tensor: DeviceTensor) -> tuple[tuple[int, ...], str]:
    """What the device process needs to make up a tensor no stream has made yet (a race): its shape and dtype."""
    return tuple(tensor.shape), _dtype_name(tensor.dtype)


@functools.cache
def _dtype_name(dtype: torch.dtype) -> str:
    """``"float32"`` for ``torch.float32``, as the device process names it."""
    return str(dtype).removeprefix("torch.")


def _refused_on_the_host(tensor: DeviceTensor, name: str) -> None:
    """What torch refuses before reading anything: a number from a tensor of more than one element, an index from
    a tensor that is not one integer, numpy from a device tensor."""
    if name == "numpy":
        raise TypeError(f"can't convert {tensor.device} device type tensor to numpy. Use Tensor.cpu() to copy the "
                        "tensor to host memory first.")
    if name == "__index__" and (tensor.numel() != 1 or tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise TypeError("only integer tensors of a single element can be converted to an index")
    if name == "__bool__" and tensor.numel() > 1:
        raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous")
    if name in ("item", "__int__", "__float__") and tensor.numel() != 1:
        raise RuntimeError(f"a Tensor with {tensor.numel()} elements cannot be converted to Scalar")


def _read(tensor: DeviceTensor, kind: SyncKind, name: str, rest: tuple) -> Any:
    _refused_on_the_host(tensor, name)
    host = unpack(tensor._gpu.ask(("read", kind.value, Ref(tensor._id), reader_line(), _layout_of(tensor))))
    if name == "__repr__":  # as torch prints a CUDA tensor: the values, then the device
        return repr(host)[:-1] + f", device='{tensor.device}')"
    if name == "__format__":
        return format(host, *rest)
    if name in ("__int__", "__index__"):
        return int(host.item())
    if name == "__float__":
        return float(host.item())
    return getattr(host, name)(*rest)


_INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}


def _mask_indices(func: Any, args: tuple) -> bool:
    """Whether an index_put's indices hold a boolean mask."""
    return func is not aten.index.Tensor and any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
                                                 for i in args[1] if i is not None)


def _masked_fill(func: Any, args: tuple) -> bool:
    """``x[mask] = v``: ATen's index_put_ with one boolean mask on the device and a one-element host value is
    ``masked_fill_``, which reads the value on the host (no copy; a device value goes through the mask's indices)."""
    if func not in (aten.index_put_.default, aten._index_put_impl_.default, aten.index_put.default):
        return False
    indices, value = args[1], args[2]
    accumulate = len(args) > 3 and bool(args[3])
    return (not accumulate and len(indices) == 1 and isinstance(indices[0], DeviceTensor)
            and indices[0].dtype in (torch.bool, torch.uint8) and not isinstance(value, DeviceTensor)
            and value.numel() == 1)


def _uploads_or_refuses(gpu: SimulatedGPU, func: Any, args: tuple, flat: list) -> None:
    """A host tensor (not a 0-d scalar) in a device op (``flat``: its arguments, flattened): an index, which torch
    uploads (a synchronous copy, counted), or anything else, which CUDA refuses with these words."""
    hosts = [t for t in flat if isinstance(t, torch.Tensor) and not isinstance(t, DeviceTensor)
             and (t.dim() > 0 or (func in _INDEXING and not _masked_fill(func, args)))]  # index_put_ moves a 0-d
    #                                                                                  host value over, as ATen does
    if not hosts:
        return
    if func in _INDEXING:
        for host in hosts:
            gpu.send(("count", SyncKind.H2D_COPY.value, reader_line(), host.numel() * host.element_size()))
        return
    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                       f"{gpu.device} and cpu! ({op_name(func)} was given a host tensor beside device tensors)")


def _to_host(func: Any, args: tuple, kwargs: dict) -> bool:
    if func is aten.copy_.default:
        return not isinstance(args[0], DeviceTensor)
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == "cpu"


def _copy_to_host(func: Any, args: tuple, kwargs: dict) -> torch.Tensor:
    """A download. Blocking: a wait, the values read back. ``non_blocking``: into pinned memory it is queued and lands
    when the device runs it (``t.to("cpu", non_blocking=True)`` makes the pinned buffer, as torch does on CUDA); into
    pageable memory the copy returns only once done, a wait."""
    copy = func is aten.copy_.default
    source = args[1] if copy else args[0]
    gpu = source._gpu
    non_blocking = bool(args[2] if copy and len(args) > 2 else kwargs.get("non_blocking"))
    if non_blocking:
        dtype = kwargs.get("dtype") or source.dtype  # the new buffer holds what such memory holds: not the data yet
        target = args[0] if copy else gpu.pinned(tuple(source.shape), dtype, in_flight_value(dtype))
        view = gpu.async_view(target, source)
        if view is not None:
            gpu.send(("to_pinned", view, Ref(source._id)))
            gpu.lands_later(view.pid)
            return target
    kind = SyncKind.PAGEABLE_D2H if non_blocking else SyncKind.D2H_COPY
    host = unpack(gpu.ask(("read", kind.value, Ref(source._id), reader_line(), _layout_of(source))))
    if copy:
        return args[0].copy_(host)
    return host.to(dtype=kwargs.get("dtype") or host.dtype)


def _sized_by_data(gpu: SimulatedGPU, func: Any, args: tuple, kwargs: dict, kind: SyncKind, reads: int = 1) -> Any:
    """Run at once, the sizes brought back (``reads`` transfers: none where the host could size it alone), then the
    outputs named with them."""
    ids = [gpu.new_id() for _ in range(4)]  # at most four outputs (unique's)
    sizes = gpu.ask(("sized", kind.value, op_name(func), _on_the_wire(args), _on_the_wire(kwargs), ids, reader_line(),
                     reads))
    if func._schema.is_mutable:  # x[mask] = v: in place, the same tensor
        return args[0]
    made = [DeviceTensor(gpu, torch.empty_strided(shape, stride, dtype=getattr(torch, dtype), device="meta"), id_)
            for id_, (shape, stride, _offset, dtype) in zip(ids, sizes)]  # the ids the device process stored them by
    return made[0] if len(made) == 1 else tuple(made)
