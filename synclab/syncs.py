"""Count host-device synchronisations: ``with count_syncs() as report: ...``.

Taught in chapter 0 (the primer) and used by every chapter's checks.

A synchronisation is a point where the host (Python) must wait for the device to
finish queued work: reading a value back (``.item()``, ``.tolist()``, ``if t:``),
an operation whose output *shape* depends on device data (``nonzero``, boolean
masks), a copy that blocks, or an explicit wait (stream, event, device). While the
host waits, nobody queues the next kernels, so the GPU soon runs dry.

A ``non_blocking`` upload from pageable memory is reported apart, as a staging
copy (``report.staged``): the host copies the data into a pinned bounce buffer
itself, which costs host time, but it does not wait for the device (chapter 3).

A sync made on purpose is marked the way vLLM marks it (``gpu_sync_allowed()``,
since vLLM #44800; per thread and per asyncio task since #51455): code inside
``with gpu_sync_allowed():`` still syncs and is still counted, but its events carry
``allowed=True`` and ``report.stray`` leaves them out (chapters 3 and 6).

How the counter works. Two observers sit around the block:

* a ``TorchFunctionMode`` sees Python-level calls (``item``, ``tolist``,
  ``__bool__``, ``.to(...)``, ``copy_``, ``torch.tensor(..., device=...)``) with
  their arguments, so it can tell a blocking copy from a ``non_blocking`` one and
  pinned memory from pageable memory;
* a ``TorchDispatchMode`` sees aten ops, among them ``_local_scalar_dense`` (the
  one op every scalar read goes through, including the ``__index__`` hidden in
  ``x[start:end]`` with tensor bounds) and the data-dependent-shape ops.

A sync found at the Python level is not counted again at the aten level.

On a GPU, "device tensors" are CUDA tensors and the block is armed as vLLM's sync
check arms it since #51455: torch's sync debug mode at ``"warn"`` (the mode is one
switch for the whole process), and a ``warnings.showwarning`` hook that counts a
warning only on a thread or task inside the block, apart for allowed regions. That
count is reported beside ours as ground truth. On a CPU-only machine, device tensors are the CPU tensors that
:func:`synclab.device.to_device` marked (and everything computed from them inside
the block): the report then lists the syncs the same code would perform on a GPU.
Host-side metadata (``num_scheduled_tokens_cpu``) is never marked and never counts.
"""

from __future__ import annotations

import linecache
import os
import contextlib
import sys
import threading
import warnings
from collections import Counter
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum
from html import escape
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch._C._profiler import _RecordFunctionFast  # no op of its own: the modes above do not see it
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map_only

import synclab.device as _device_module
from synclab.device import (
    SIM_DEVICE,
    called_from_device_layer,
    device_process,
    has_cuda,
    is_device_tensor,
    PIN_INTENT,
    pinning_answer,
    is_async_host_side,
    is_simulated,
    mark_device,
)


class SyncKind(str, Enum):
    """Why the host had to wait. ``value`` is the label shown to readers.

    All but one are *device waits*: the host stops until the device has run
    everything queued before the call. The exception is :attr:`STAGED_COPY`, a
    host-blocking copy that does not wait for the device (see
    :attr:`waits_for_device`). Which kinds PyTorch's sync debug mode reports follows
    PyTorch's C++: ``c10::cuda::memcpy_and_sync`` and ``stream_synchronize`` warn,
    ``device_synchronize``, ``CUDAEvent::synchronize`` and ``cudaMemcpyAsync`` do not.
    """

    ITEM = "item"  # t.item(), int(t), float(t), torch.equal: _local_scalar_dense, a blocking 1-element copy
    TOLIST = "tolist"  # t.tolist(): a device-to-host copy of the whole tensor
    BOOL = "bool"  # if t: / bool(t) / assert t
    TENSOR_SLICE = "tensor-bounded slice"  # x[t0:t1] with device 0-d bounds (__index__)
    NONZERO = "data-dependent output size"  # nonzero, torch.where(cond), masked_select, unique, bincount, repeat_interleave
    BOOL_MASK_INDEX = "boolean-mask indexing"  # x[mask], x[mask] = v
    D2H_COPY = "blocking device-to-host copy"  # t.cpu(), t.to("cpu"), cpu_buf.copy_(t)
    H2D_COPY = "synchronous host-to-device copy"  # t.to(dev), torch.tensor(list, device=dev)
    PAGEABLE_D2H = "non_blocking copy into pageable memory"  # cudaMemcpyAsync returns once the copy is done
    STAGED_COPY = "staging copy from pageable memory"  # non_blocking upload from pageable memory: not a device wait
    PRINT = "print"  # print(t), f"{t}": formatting reads the values back
    STREAM_SYNC = "Stream.synchronize"  # torch.cuda.Stream.synchronize(): waits for one stream
    EVENT_SYNC = "Event.synchronize"  # torch.cuda.Event.synchronize(): waits for the work before the event
    DEVICE_SYNC = "torch.cuda.synchronize"  # waits for every stream of the device

    @property
    def waits_for_device(self) -> bool:
        """False only for a staging copy: the host copies into a pinned bounce buffer, the device queue runs on.

        CUDA's *API synchronization behavior* notes: an asynchronous copy from pageable
        memory "may synchronize with the stream" to stage it; for a copy that fits the
        driver's staging buffers the call returns once the data is staged, without
        waiting for queued kernels (``tests/test_syncs.py`` checks both on a GPU).
        """
        return self is not SyncKind.STAGED_COPY

    @property
    def seen_by_cuda_debug_mode(self) -> bool:
        """Whether ``torch.cuda.set_sync_debug_mode`` reports this kind (it misses four)."""
        return self not in _UNSEEN_BY_DEBUG_MODE


_UNSEEN_BY_DEBUG_MODE = {SyncKind.PAGEABLE_D2H, SyncKind.STAGED_COPY, SyncKind.EVENT_SYNC, SyncKind.DEVICE_SYNC}
EXPLICIT_WAITS = (SyncKind.STREAM_SYNC, SyncKind.EVENT_SYNC, SyncKind.DEVICE_SYNC)


class RaceKind(str, Enum):
    """A host read that waits for nothing, and should have: no sync, a race (``SyncReport.early_reads``)."""

    EARLY_READ = "read before its download landed"  # the simulated device's in-flight buffers (-12345 until a wait)


@dataclass(frozen=True)
class SyncEvent:
    """One synchronisation: its kind, the torch op, and the line of user code that caused it."""

    kind: SyncKind | RaceKind
    op: str
    filename: str
    lineno: int
    function: str
    code: str
    nbytes: int = 0  # bytes read back to the host, for the kinds that copy data (tolist, item, D2H)
    allowed: bool = False  # made inside gpu_sync_allowed(): a sync on purpose, not a stray one
    allowed_in: str = ""  # the file whose code opened that region (the innermost one)

    @property
    def where(self) -> str:
        return f"{location(self.filename, self.lineno)} in {self.function}"

    def __str__(self) -> str:
        return f"{self.kind.value:<40} {self.where:<38} {self.code}" + ("  [allowed]" if self.allowed else "")


@dataclass
class SyncReport:
    """What :func:`count_syncs` saw.

    ``events`` are the device waits (``count`` of them); ``staged`` the staging copies
    from pageable memory, which block the host without waiting for the device. They
    are kept apart: only the first drain the device's queue.
    """

    events: list[SyncEvent] = field(default_factory=list)
    staged: list[SyncEvent] = field(default_factory=list)
    early_reads: list[SyncEvent] = field(default_factory=list)  # host reads of a download still in flight (a race)
    simulated: bool = True  # True: CPU standing in for a GPU
    cuda_reported: int | None = None  # torch.cuda.set_sync_debug_mode's own count (GPU only)
    cuda_stray: int | None = None  # ... of which outside gpu_sync_allowed() regions

    @property
    def count(self) -> int:
        """Device waits: the syncs."""
        return len(self.events)

    @property
    def stray(self) -> list[SyncEvent]:
        """The device waits made outside ``gpu_sync_allowed()``: the ones a sync check flags."""
        return [e for e in self.events if not e.allowed]

    @property
    def stray_count(self) -> int:
        return len(self.stray)

    @property
    def staged_count(self) -> int:
        """Host-blocking staging copies (``non_blocking`` uploads from pageable memory)."""
        return len(self.staged)

    @property
    def bytes_to_host(self) -> int:
        """Bytes the block read back from the device (a sync that copies a whole tensor is costly twice)."""
        return sum(e.nbytes for e in self.events)

    @property
    def cuda_visible_count(self) -> int:
        """What CUDA's debug mode should report for this block: the events of the kinds it sees."""
        return sum(e.kind.seen_by_cuda_debug_mode for e in self.events + self.staged)

    def by_kind(self) -> Counter[str]:
        return Counter(e.kind.value for e in self.events + self.staged)

    def __str__(self) -> str:
        where = "simulated GPU (CPU tensors marked as device memory)" if self.simulated else "CUDA"
        lines = [f"{self.count} host-device sync(s) [{where}]"]
        lines += [f"  {e}" for e in self.events]
        if self.staged:
            lines.append(f"{self.staged_count} staging copy(ies) from pageable memory (the host copies; "
                         "no wait for the device)")
            lines += [f"  {e}" for e in self.staged]
        if self.early_reads:
            lines.append(f"{len(self.early_reads)} read(s) of a download before it landed (a race, not a sync: on a "
                         "GPU the buffer holds whatever it held)")
            lines += [f"  {e}" for e in self.early_reads]
        if self.cuda_reported is not None:
            lines.append(f"  torch.cuda.set_sync_debug_mode reported {self.cuda_reported}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        def table(events: list[SyncEvent]) -> str:
            if not events:
                return ""
            rows = "".join(
                f"<tr><td>{escape(e.kind.value)}</td><td><code>{escape(e.where)}</code></td>"
                f"<td><code>{escape(e.code)}</code></td></tr>"
                for e in events
            )
            return "<table><tr><th>kind</th><th>where</th><th>code</th></tr>" + rows + "</table>"

        cuda = (
            f" &middot; CUDA debug mode: {self.cuda_reported}" if self.cuda_reported is not None else ""
        )
        where = "simulated GPU" if self.simulated else "CUDA"
        staged = (
            f"<div><b>{self.staged_count} staging copy(ies)</b> from pageable memory: the host copies, "
            f"the device is not waited for</div>{table(self.staged)}" if self.staged else ""
        )
        return f"<div><b>{self.count} host-device sync(s)</b> [{where}]{cuda}{table(self.events)}{staged}</div>"


# ----------------------------------------------------------------------------- where a sync came from

_TORCH_DIR = os.path.dirname(torch.__file__)
_SKIP_FILES = {__file__, __file__.replace(".pyc", ".py")}


def attribute_syncs_to_callers(filename: str) -> None:
    """Report syncs found in ``filename`` (a synclab helper) at the line that called into it."""
    _SKIP_FILES.update({filename, filename.replace(".pyc", ".py")})


attribute_syncs_to_callers(_device_module.__file__)  # to_device's simulated copy belongs to its caller


_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cell_label(filename: str) -> str:
    """A notebook cell as IPython's tracebacks name it (``Cell In[7]``), or ``<cell>`` outside a kernel."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        number = shell.compile._filename_map.get(filename) if shell is not None else None
    except (ImportError, AttributeError):
        number = None
    return f"Cell In[{number}]" if number is not None else "<cell>"


def _short_filename(filename: str) -> str:
    if "ipykernel_" in filename or filename.startswith("<ipython-input"):
        return _cell_label(filename)
    if os.path.abspath(filename).startswith(os.path.join(_PACKAGE_PARENT, "synclab") + os.sep):
        return os.path.relpath(filename, _PACKAGE_PARENT)  # synclab/<chapter>/<room>.py: which room of which chapter
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return os.path.basename(filename)
    return os.path.basename(filename) if rel.startswith("..") else rel


def location(filename: str, lineno: int, code: str = "") -> str:
    """Where a line is, as a reader finds it: ``Cell In[7]:14``, ``synclab/engine/pooler.py:63`` (and its source)."""
    return f"{_short_filename(filename)}:{lineno}" + (f" `{code}`" if code else "")


def _user_frame() -> tuple[str, int, str, str]:
    """The innermost frame outside torch and this module: the code that asked for the sync."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        skip = (
            filename in _SKIP_FILES
            or filename.startswith(_TORCH_DIR)
            or filename.endswith(os.sep + "contextlib.py")
        )
        if not skip:
            code = linecache.getline(filename, frame.f_lineno).strip()
            return filename, frame.f_lineno, _function_name(frame), code
        frame = frame.f_back
    return "?", 0, "?", ""


_INLINED_IN_312 = {"<listcomp>", "<dictcomp>", "<setcomp>"}  # PEP 709: no frame of their own from Python 3.12


def _function_name(frame: Any) -> str:
    """The function a line belongs to, the same on every Python: a comprehension is named by its enclosing function,
    as Python 3.12 names it (the GPU machine runs 3.12, this lab's pinned set 3.11)."""
    while frame.f_code.co_name in _INLINED_IN_312 and frame.f_back is not None:
        frame = frame.f_back
    return frame.f_code.co_name


# ----------------------------------------------------------------------------- the two observers


def _tensors(obj: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _any_device(obj: Any) -> bool:
    return any(is_device_tensor(t) for t in _tensors(obj))


def _target_is_device(args: tuple, kwargs: dict) -> bool | None:
    """For ``t.to(...)``/``torch.tensor(..., device=...)``: True device, False host, None unchanged."""
    candidates = list(args) + [kwargs.get("device")]
    for c in candidates:
        if is_simulated(c):
            return True
        if isinstance(c, torch.Tensor):
            return is_device_tensor(c)
        if isinstance(c, (str, torch.device)) and not isinstance(c, torch.dtype):
            try:
                return torch.device(c).type != "cpu"
            except RuntimeError:
                continue
        if isinstance(c, int) and not isinstance(c, bool):  # t.to(0): a CUDA ordinal
            return True
    return None


def _target_dtype(args: tuple, kwargs: dict) -> torch.dtype | None:
    """For ``t.to(...)``: the dtype asked for (``t.to(device, torch.int32)``, ``dtype=``), or None."""
    return next((a for a in [*args, kwargs.get("dtype")] if isinstance(a, torch.dtype)), None)


_SCALAR_READS = {"item": SyncKind.ITEM, "__int__": SyncKind.ITEM, "__float__": SyncKind.ITEM,
                 "__index__": SyncKind.ITEM, "__complex__": SyncKind.ITEM, "tolist": SyncKind.TOLIST,
                 "__bool__": SyncKind.BOOL, "__repr__": SyncKind.PRINT, "__str__": SyncKind.PRINT,
                 "__format__": SyncKind.PRINT, "__contains__": SyncKind.BOOL}
# Reads of one value: on a tensor of any other size they raise on the host, before any copy (no sync).
_ONE_VALUE = {"item", "__int__", "__float__", "__index__", "__complex__", "__bool__"}
# Routes to a device tensor's bytes that CUDA refuses: numpy reads host memory only. The simulated device
# refuses them the same way (with the message CUDA's tensors give, where PyTorch's is known).
_CUDA_NUMPY = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
               "memory first.")
_REFUSED_ON_CUDA = {"numpy": (TypeError, _CUDA_NUMPY), "__array__": (TypeError, _CUDA_NUMPY),
                    "__dlpack__": (BufferError, "numpy's from_dlpack takes host memory only: a DLPack capsule of "
                                                "a cuda:0 tensor is refused. Use Tensor.cpu() first.")}
# Routes that copy a device tensor's bytes to the host without an aten op the dispatch level would see.
# Pickling saves the storage through one blocking host copy (UntypedStorage.cpu()); on CUDA no tensor op shows
# it, and _watch_explicit_syncs counts it. A storage read on the host fetches one value per read: CUDA waits once per byte of
# `untyped_storage().tolist()` (64 for 16 floats, the debug mode agreeing), once per element of a typed
# storage. The simulated device sees the storage being taken, not the reads, so it counts those reads at the
# taking (data_ptr() alone would be no sync on CUDA).
_HIDDEN_READS = {"__reduce_ex__": SyncKind.D2H_COPY, "untyped_storage": SyncKind.ITEM,
                 "storage": SyncKind.ITEM, "_typed_storage": SyncKind.ITEM}  # a storage read: one value at a time


def _python_list_indices(index: Any) -> int:
    """How many Python lists of integers an index holds (``x[[2, 9]]``: 1; ``x[[0], [1]]``: 2)."""
    parts = index if isinstance(index, tuple) else (index,)
    return sum(1 for part in parts if isinstance(part, list) and part
               and all(isinstance(i, int) and not isinstance(i, bool) for i in part))


def _hidden_reads(name: str, tensor: torch.Tensor) -> int:
    """How many waits a route of ``_HIDDEN_READS`` costs on CUDA: one copy to pickle, one per value read."""
    if name == "__reduce_ex__":
        return 1
    nbytes = tensor.untyped_storage().nbytes()  # the whole storage, of which the tensor may be a view
    return nbytes if name == "untyped_storage" else nbytes // tensor.element_size()
_CREATE_FROM_DATA = {"tensor", "as_tensor", "asarray"}
# Torch functions whose own code reads a device value on the host where the modes do not look (a handler runs its
# function with them set aside, and a composite's intermediate tensors are not marked): tensordot's tensor dims,
# `element in host_tensor` with a device element (the comparison's .item()), one_hot's number of classes.
_READS_INSIDE = {"tensordot", "__contains__", "one_hot"}


def _reads_inside(name: str, args: tuple, kwargs: dict) -> tuple[SyncKind | None, int]:
    """What the body of a ``_READS_INSIDE`` function reads back, and how many times: tensordot reads a one-value
    dims with .item(), else each of its two rows with .tolist()."""
    if name == "one_hot":  # CUDA reads max() back for the number of classes when it is not given (-1)
        classes = kwargs.get("num_classes", args[1] if len(args) > 1 else -1)
        x = args[0] if args else None
        reads = isinstance(x, torch.Tensor) and is_device_tensor(x) and x.numel() > 0 and classes == -1
        return (SyncKind.ITEM, 1) if reads else (None, 0)
    if name == "tensordot":
        dims = kwargs.get("dims", args[2] if len(args) > 2 else None)
        if not (isinstance(dims, torch.Tensor) and is_device_tensor(dims)):
            return None, 0
        return (SyncKind.ITEM, 1) if dims.numel() == 1 else (SyncKind.TOLIST, 2)
    element_on_device = len(args) > 1 and isinstance(args[1], torch.Tensor) and is_device_tensor(args[1])
    host_self = isinstance(args[0], torch.Tensor) and not is_device_tensor(args[0]) if args else False
    return (SyncKind.BOOL, 1) if element_on_device and host_self else (None, 0)
_READS_BACK = {SyncKind.ITEM, SyncKind.TOLIST, SyncKind.BOOL, SyncKind.PRINT, SyncKind.D2H_COPY}


def _bytes_to_host(kind: SyncKind, name: str, args: tuple) -> int:
    """Size of what a read-back moves to the host: the device-side source tensor, if any."""
    src = args[1] if name == "copy_" and len(args) > 1 else args[0] if args else None
    moves_data = kind in _READS_BACK or kind is SyncKind.PAGEABLE_D2H
    if not moves_data or not isinstance(src, torch.Tensor) or not is_device_tensor(src):
        return 0
    return src.numel() * src.element_size()


# The name of the zero-length ``record_function`` range ``count_syncs(profiler_marks=True)`` opens at each
# sync it counts, then the kind's name and the op: the profiler's timeline draws its sync marks from these,
# so that it shows exactly what the counter counted (a CPU build of torch runs ``.tolist()`` with no op at all).
PROFILER_MARK = "synclab-sync "


IN_FLIGHT = -12345.0  # what a host buffer holds before its download lands (synclab.sim.cuda.GARBAGE is this value)


def in_flight_value(dtype: torch.dtype) -> float | int | bool:
    """What a host buffer holds before its copy has landed, in ``dtype``: the one convention of the simulated device
    (its streams, :mod:`synclab.sim.cuda`, and this counter's downloads), so that a hint that looks for it finds it
    either way. :data:`IN_FLIGHT` (-12345) wherever the dtype holds it, a value no step computes (ids, lengths and
    counts are never negative); ``True`` in a bool; the largest value of a narrower integer."""
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point or dtype.is_complex:
        return IN_FLIGHT
    info = torch.iinfo(dtype)
    return int(IN_FLIGHT) if info.min <= IN_FLIGHT <= info.max else info.max


class _Observer:
    """State shared by the two modes of one ``count_syncs`` block."""

    def __init__(self, simulated: bool, profiler_marks: bool = False) -> None:
        self.simulated = simulated
        self.profiler_marks = profiler_marks
        self.events: list[SyncEvent] = []  # device waits
        self.staged: list[SyncEvent] = []  # staging copies from pageable memory
        self.suppress = 0  # >0 while a Python-level op already counted its sync
        self.current_op = ""  # the Python-level op being run (names a sync found below it)
        self.current_args: tuple = ()  # ... and its arguments
        self.in_flight: list[tuple[torch.Tensor, torch.Tensor]] = []  # (host buffer, the values it will hold)
        self.early_reads: list[SyncEvent] = []  # host reads of a buffer in ``in_flight``: a race, not a sync

    def hold_until_a_wait(self, host: torch.Tensor) -> None:
        """A non_blocking download on the simulated device: ``host`` holds garbage until the host next waits for the
        device, as a GPU's pinned buffer does until the copy lands (reading it before is a race, not a sync)."""
        with torch._C.DisableTorchFunction():
            self.in_flight.append((host, host.detach().clone()))
            host.fill_(in_flight_value(host.dtype))

    def note_early_read(self, name: str, args: tuple) -> None:
        """Record a host op that reads a download's buffer before it has landed (the simulated device only: the
        counter knows which buffers are in flight). On a GPU such a read sees whatever the memory held, so the host
        acts on values the step never computed; a wait on an event recorded after the copy, first, makes it safe.
        Taught in chapter 2 (a copy read too early) and chapter 6 (a stop hook's early read)."""
        with torch._C.DisableTorchFunction():
            held = {host.untyped_storage().data_ptr() for host, _ in self.in_flight}
            read = args[1:] if name == "copy_" else args  # copy_'s first argument is written, not read
            if not any(isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() in held for a in read):
                return
        filename, lineno, function, code = _user_frame()
        self.early_reads.append(SyncEvent(RaceKind.EARLY_READ, name, filename, lineno, function, code))

    def land(self) -> None:
        """Every download in flight lands: the host waited for the device, or the block ended."""
        with torch._C.DisableTorchFunction():
            for host, values in self.in_flight:
                host.copy_(values)
        self.in_flight.clear()

    def record(self, kind: SyncKind, op: str, nbytes: int = 0) -> None:
        if kind.waits_for_device and self.in_flight:  # everything queued before the wait is done when it returns
            self.land()
        filename, lineno, function, code = _user_frame()
        openers = _allowed_by.get()
        event = SyncEvent(kind, op, filename, lineno, function, code, nbytes, allowed=bool(openers),
                          allowed_in=openers[-1] if openers else "")
        (self.events if kind.waits_for_device else self.staged).append(event)
        if self.profiler_marks:  # recorded before the op runs: the mark sits where the wait begins
            with _RecordFunctionFast(f"{PROFILER_MARK}{kind.name} {op}"):
                pass


class _FunctionLevel(TorchFunctionMode):
    def __init__(self, obs: _Observer) -> None:
        super().__init__()
        self.obs = obs

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        obs = self.obs
        name = getattr(func, "__name__", str(func))
        owner = getattr(getattr(func, "__self__", None), "__name__", "")

        # Inside the block a marked tensor's `.device` is the simulated device, so that
        # `torch.zeros(n, device=x.device)` lands in (simulated) device memory too.
        if name == "__get__" and owner == "device":
            dev = func(*args, **kwargs)
            return SIM_DEVICE if obs.simulated and is_device_tensor(args[0]) else dev

        if obs.simulated and name not in _TAKES_HOST_TENSORS and name not in _REFUSED_BY_TORCH_ITSELF:
            _refuse_mixed_devices(name, args, kwargs)

        if obs.in_flight and name not in _READS_NO_DATA:
            obs.note_early_read(name, args)

        kind = None
        sim_copy_to: bool | None = None  # on the CPU, a transfer must produce a new tensor
        in_flight = False  # a download that returns before it lands (a GPU's non_blocking copy to pinned memory)
        # (a name test first: this runs on every torch call in the block)
        reads = name in _SCALAR_READS or name in _REFUSED_ON_CUDA or name in _HIDDEN_READS
        on_device = reads and bool(args) and isinstance(args[0], torch.Tensor) and is_device_tensor(args[0])
        if on_device and obs.simulated and name in _REFUSED_ON_CUDA:
            error, message = _REFUSED_ON_CUDA[name]
            raise error(message)
        if on_device and name in _SCALAR_READS and (name not in _ONE_VALUE or args[0].numel() == 1):
            kind = _SCALAR_READS[name]
        elif on_device and name in _HIDDEN_READS and obs.simulated:  # on CUDA: _watch_explicit_syncs
            kind = _HIDDEN_READS[name]
            for _ in range(_hidden_reads(name, args[0]) - 1):  # the last one is recorded below, as every kind is
                obs.record(kind, name)
        elif not obs.simulated and name in ("__getitem__", "__setitem__") and len(args) > 1 and \
                isinstance(args[0], torch.Tensor) and is_device_tensor(args[0]):
            # x[[2, 9]]: torch builds the index from the list straight on the device, below the dispatch level,
            # with a blocking copy from pageable memory (the debug mode reports it; H100, torch 2.11). The
            # simulated device sees the host index at the dispatch level instead.
            for _ in range(_python_list_indices(args[1])):
                obs.record(SyncKind.H2D_COPY, f"{name} (a Python list index uploaded)")
        elif name in ("to", "cpu", "cuda") and args and isinstance(args[0], torch.Tensor):
            src = args[0]
            target = False if name == "cpu" else True if name == "cuda" else _target_is_device(args[1:], kwargs)
            non_blocking = bool(kwargs.get("non_blocking", False)) or any(a is True for a in args[1:])
            kind, sim_copy_to = self._transfer(src, target, non_blocking, dtype=_target_dtype(args[1:], kwargs))
            in_flight = obs.simulated and sim_copy_to is False and kind is None
        elif name == "copy_" and len(args) >= 2:
            dst, src = args[0], args[1]
            non_blocking = bool(kwargs.get("non_blocking", args[2] if len(args) > 2 else False))
            if isinstance(src, torch.Tensor):
                kind, copy_to = self._transfer(src, is_device_tensor(dst), non_blocking, dst=dst)
                in_flight = obs.simulated and copy_to is False and kind is None
        elif name in _CREATE_FROM_DATA and _target_is_device((), kwargs):
            if not (args and isinstance(args[0], torch.Tensor) and is_device_tensor(args[0])):
                kind = SyncKind.H2D_COPY
        elif name == "new_tensor" and len(args) > 1 and isinstance(args[0], torch.Tensor):
            # x.new_tensor(data): on x's device unless told otherwise, so an upload from x on the device
            target = _target_is_device((), kwargs)
            data = args[1]
            if (is_device_tensor(args[0]) if target is None else target) and not (
                    isinstance(data, torch.Tensor) and is_device_tensor(data)):
                kind = SyncKind.H2D_COPY
        elif obs.simulated and name in _HOST_ONLY_ARGUMENTS:
            _refuse_a_device_argument_cuda_wants_on_the_host(name, args)
        elif name in _READS_INSIDE:
            # a Python-level torch function whose own code reads device values back (its body runs uncounted); on
            # CUDA the dispatcher sees an .item() inside it, never a .tolist() (tensordot's two rows of dims)
            kind, reads_inside = _reads_inside(name, args, kwargs)
            if not obs.simulated and kind is not SyncKind.TOLIST:
                kind, reads_inside = None, 0
            for _ in range(reads_inside - 1):  # the last one is recorded below, as every kind is
                obs.record(kind, name)  # type: ignore[arg-type]

        if kind is not None:
            obs.record(kind, name, _bytes_to_host(kind, name, args))
            obs.suppress += 1
        previous = obs.current_op, obs.current_args
        obs.current_op, obs.current_args = name, args
        try:
            out = func(*args, **kwargs)
        finally:
            obs.current_op, obs.current_args = previous
            if kind is not None:
                obs.suppress -= 1

        if obs.simulated:
            out = self._propagate_marks(name, args, kwargs, out, sim_copy_to)
        if in_flight and isinstance(out, torch.Tensor):
            obs.hold_until_a_wait(out)
        if "pin_memory" in kwargs and isinstance(out, torch.Tensor) and not is_device_tensor(out):
            # Asked for pinned memory, or passed pin_memory=<availability> where pinning is impossible.
            if kwargs["pin_memory"] or not pinning_answer():
                setattr(out, PIN_INTENT, True)
        return out

    def _transfer(
        self, src: torch.Tensor, target_device: bool | None, non_blocking: bool, dst: torch.Tensor | None = None,
        dtype: torch.dtype | None = None,
    ) -> tuple[SyncKind | None, bool | None]:
        """Classify a copy between host and device (``dst`` None: the tensor ``src.to(..., dtype=dtype)`` makes).
        Returns (sync kind or None, copy target)."""
        src_dev = is_device_tensor(src)
        if target_device is None or target_device == src_dev:
            return None, None  # same side: a dtype change or a device-to-device copy
        if not non_blocking:
            return (SyncKind.H2D_COPY if target_device else SyncKind.D2H_COPY), target_device
        if target_device:
            runs_alone = is_async_host_side(src, dst, None if dst is not None else dtype)
        else:  # into pinned memory as it lies (a download .to() makes lands in a pinned buffer torch allocates)
            runs_alone = dst is None or is_async_host_side(dst, src)
        if runs_alone:
            return None, target_device
        # From pageable memory CUDA must stage the data: an upload returns once the host has copied it
        # into a pinned bounce buffer (no device wait, CUDA's debug mode silent); a download into pageable
        # memory returns only when the copy, and so everything queued before it, is done. A pinned tensor that
        # cannot be copied as it lies goes through a pageable temporary (synclab.device.copies_as_they_lie), and counts the same.
        return (SyncKind.STAGED_COPY if target_device else SyncKind.PAGEABLE_D2H), target_device

    @staticmethod
    def _propagate_marks(name: str, args: tuple, kwargs: dict, out: Any, copy_to: bool | None) -> Any:
        if copy_to is not None and isinstance(out, torch.Tensor):
            if out is args[0]:  # cpu -> "cpu" returned the same tensor: make the copy a GPU would
                out = out.clone()
            if copy_to:
                mark_device(out)
            elif hasattr(out, "_synclab_on_device"):
                del out._synclab_on_device
            return out
        device_kw = kwargs.get("device")
        if (isinstance(device_kw, str) and is_simulated(device_kw)) or (
            name not in _SCALAR_READS and name != "copy_" and _any_device((args, kwargs))
        ):
            tree_map_only(torch.Tensor, mark_device, out)
        return out


_DATA_DEPENDENT = {"nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive", "_unique",
                   # a dense tensor made sparse: its number of nonzeros sizes the output
                   "_to_sparse", "_to_sparse_csr", "_to_sparse_csc", "_to_sparse_bsr", "_to_sparse_bsc"}


class _DispatchLevel(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch's opt-out, read when the class is made. By default a mode's __torch_dispatch__ is wrapped in
        # torch._dynamo.disable, and the wrapper's first call imports torch._dynamo: 2 s of CPU in every kernel
        # that counts a sync. The counter runs eager code only; nothing here is compiled.
        return False

    def __init__(self, obs: _Observer) -> None:
        super().__init__()
        self.obs = obs

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.obs.simulated:
            name = func.overloadpacket.__name__
            if not self.obs.current_op or name == self.obs.current_op:
                # called as itself: inside a composite (one_hot's scatter_ into its own zeros), the buffers the
                # decomposition makes are unmarked host tensors, and the output is marked afterwards
                _refuse_device_data_into_host(func, args, kwargs)
            _refuse_a_host_mask(func, args)
            _refuse_an_aliased_mask_write(func, args)
            _refuse_a_device_argument_cuda_wants_on_the_host(name, args)
        if self.obs.suppress == 0:
            kind = self._classify(func, args, kwargs)
            if kind is not None:
                scalar = kind in (SyncKind.ITEM, SyncKind.BOOL, SyncKind.TENSOR_SLICE) and args
                nbytes = args[0].element_size() if scalar and isinstance(args[0], torch.Tensor) else 0
                self.obs.record(kind, str(func), nbytes)
        return func(*args, **kwargs)

    def _classify(self, func: Any, args: tuple, kwargs: dict) -> SyncKind | None:
        name = func.overloadpacket.__name__
        if name == "copy_" and self.obs.current_op == "__setitem__" and len(args) >= 2:
            return self._setitem_copy(args[1])
        if not _any_device((args, kwargs)):
            return None
        if name == "_local_scalar_dense":
            in_indexing = self.obs.current_op in ("__getitem__", "__setitem__")
            return SyncKind.TENSOR_SLICE if in_indexing else SyncKind.ITEM
        if name == "equal":
            return SyncKind.ITEM if _equal_reads_back(args[0], args[1]) else None
        if name == "is_nonzero":
            return SyncKind.BOOL
        if name in _DATA_DEPENDENT:
            return SyncKind.NONZERO
        if name == "bincount" and args[0].numel() > 0:
            # ATen's CUDA bincount sizes its output from the data: it reads min() (negative inputs are
            # refused) and max() back, whatever minlength says.
            self.obs.record(SyncKind.NONZERO, f"{func} (min check)")
            return SyncKind.NONZERO
        if name == "repeat_interleave" and kwargs.get("output_size") is None and func._overloadname == "Tensor":
            # ATen's repeat_interleave_common (ATen/native/Repeat.h) reads twice: cumsum[-1].item()
            # for the output size, then (repeats >= 0).all().item() to refuse negative repeats.
            self.obs.record(SyncKind.NONZERO, f"{func} (output size)")
            return SyncKind.NONZERO
        if name in ("index", "index_put", "index_put_", "_index_put_impl_"):
            indices = args[1] if len(args) > 1 else kwargs.get("indices", [])
            masks = [t for t in indices if t is not None and t.dtype in (torch.bool, torch.uint8)]
            value = args[2] if len(args) > 2 else None
            if isinstance(args[0], torch.Tensor) and is_device_tensor(args[0]):
                # x[[2, 9]] or x[host_idx]: ATen moves each host index to the device with a blocking copy
                # from pageable memory (make_info in TensorAdvancedIndexing.cpp), one wait per index tensor.
                for _ in range(sum(1 for t in indices if t is not None and t.dim() > 0 and not is_device_tensor(t)
                                   and t.dtype not in (torch.bool, torch.uint8))):
                    self.obs.record(SyncKind.H2D_COPY, f"{func} (a host index uploaded)")
            if not masks:
                if name != "index" and _is_host_scalar(value):
                    # x[idx] = 0: torch keeps the Python scalar in host memory and copies it to the
                    # device inside index_put_, blocking (vLLM's penalties use index_fill_ instead).
                    return SyncKind.H2D_COPY
                return None  # integer indices: a gather/scatter the device does alone
            if self.obs.current_op == "__setitem__" and len(self.obs.current_args) > 2:
                value = self.obs.current_args[2]  # the object the user passed (aten may see a converted copy)
            if name != "index" and _becomes_masked_fill(indices, masks, value):
                return None
            return SyncKind.BOOL_MASK_INDEX
        return None


    def _setitem_copy(self, src: Any) -> SyncKind | None:
        """``x[i] = v`` where the two sides live apart: ATen's ``copy_to`` (TensorIndexing.h) runs a blocking ``copy_``.

        A Python scalar arrives as a 0-d host tensor. When the indexed part has the value's shape
        (``x[i] = 5``: both 0-d) it is copied over, blocking; when the shapes differ
        (``x[i:i+1] = 5``) the scalar becomes a ``fill_`` argument and nothing is copied.
        """
        target = self.obs.current_args[0] if self.obs.current_args else None
        if not isinstance(target, torch.Tensor) or not isinstance(src, torch.Tensor):
            return None
        if is_device_tensor(target) == is_device_tensor(src):
            return None
        return SyncKind.H2D_COPY if is_device_tensor(target) else SyncKind.D2H_COPY


# In-place and out= ops that may take a source on the other side: a copy (counted as one) and a re-pointing.
_CROSS_DEVICE_WRITES = {"copy_", "set_"}


def _refuse_device_data_into_host(func: Any, args: tuple, kwargs: dict) -> None:
    """Refuse what CUDA refuses: an in-place or ``out=`` op that writes device data into host memory
    (``host.add_(device)``, ``torch.add(device, 0, out=host)``, ``torch.cat([device], out=host)``), a 0-d host tensor
    included. On CUDA it raises before any copy; without this, the simulated device would move data to the host with
    no copy counted. (Host data into device memory is refused at the function level, :func:`_refuse_mixed_devices`.)"""
    name = func.overloadpacket.__name__
    out = kwargs.get("out")
    dest = out if isinstance(out, torch.Tensor) else args[0] if name.endswith("_") and args else None
    if not isinstance(dest, torch.Tensor) or name in _CROSS_DEVICE_WRITES or is_device_tensor(dest):
        return
    # every tensor the op reads, those inside a list included (cat, stack)
    sources = [a for a in tree_flatten((args, {k: v for k, v in kwargs.items() if k != "out"}))[0]
               if isinstance(a, torch.Tensor) and a is not dest]
    if any(is_device_tensor(a) for a in sources):
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"cuda:0 and cpu! ({name} writes device data into a host tensor: CUDA refuses it; "
                           f"copy to the host first with .cpu() or copy_, one counted sync)")


# Calls that read a tensor's metadata, never its values: safe on a buffer whose download is still in flight.
_READS_NO_DATA = {"__get__", "size", "dim", "numel", "stride", "storage_offset", "is_pinned", "is_contiguous",
                  "data_ptr", "element_size", "untyped_storage", "__len__", "record_stream"}

# Torch functions that take host tensors beside device ones on CUDA: transfers, indexing with a host index (torch
# uploads it, counted), data to upload, and the arguments CUDA wants on the host. Any other op given device tensors
# and a host tensor that is not a 0-d scalar is refused by CUDA, and by the simulated device (d + h would otherwise
# upload h uncounted).
_TAKES_HOST_TENSORS = {"to", "cpu", "cuda", "copy_", "set_", "__getitem__", "__setitem__", "index_put", "index_put_",
                       "tensor", "as_tensor", "asarray", "new_tensor", "tensor_split", "pack_padded_sequence",
                       "_pack_padded_sequence", "__contains__", "__get__", "__set__"}


# Ops that refuse a host tensor argument themselves, with their own words on any device (``split`` takes Python ints:
# a TypeError on a GPU as on a CPU), so the simulated device lets torch say it.
_REFUSED_BY_TORCH_ITSELF = {"split", "split_with_sizes"}


def _refuse_mixed_devices(name: str, args: tuple, kwargs: dict) -> None:
    """``d + h``, ``torch.cat([d, h])``: CUDA refuses a host tensor (not a 0-d scalar) beside device tensors."""
    on_device = on_host = False
    for arg in (*args, *kwargs.values()):  # a tensor, or a list of them (cat, stack): no op nests them deeper
        for t in (arg if isinstance(arg, (list, tuple)) else (arg,)):
            if isinstance(t, torch.Tensor):
                if is_device_tensor(t):
                    on_device = True
                elif t.dim() > 0:
                    on_host = True
    if not (on_device and on_host):
        return
    if called_from_device_layer(sys._getframe(2)):  # the simulated device's own bookkeeping
        return
    raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, cuda:0 and "
                       f"cpu! ({name} mixes device tensors with a host tensor: CUDA refuses it; upload the host tensor "
                       f"first, from pinned memory with non_blocking=True, as chapter 3's async_tensor_h2d does)")


# Arguments CUDA's kernels read on the host, so they must live there (a device tensor is refused with these words):
# (op, argument position, PyTorch's message).
_HOST_ONLY_ARGUMENTS = {
    "_pack_padded_sequence": (1, "'lengths' argument should be a 1D CPU int64 tensor, but got 1D cuda:0 Long tensor"),
    "tensor_split": (1, "tensor_split expected tensor_indices_or_sections to be on cpu, but it's on cuda:0"),
}


def _refuse_a_device_argument_cuda_wants_on_the_host(name: str, args: tuple) -> None:
    """``pack_padded_sequence(x, lengths_on_device)``: CUDA refuses a device tensor where its kernel reads the values
    on the host; a CPU standing for the device would read them silently, and no sync would be counted."""
    if name not in _HOST_ONLY_ARGUMENTS:
        return
    position, message = _HOST_ONLY_ARGUMENTS[name]
    if len(args) > position and isinstance(args[position], torch.Tensor) and is_device_tensor(args[position]):
        raise RuntimeError(message)


def _refuse_a_host_mask(func: Any, args: tuple) -> None:
    """``device.masked_fill_(host_mask, v)``: CUDA's kernel refuses a mask that is not on the tensor's device."""
    if func.overloadpacket.__name__ not in ("masked_fill", "masked_fill_") or len(args) < 2:
        return
    self, mask = args[0], args[1]
    if isinstance(mask, torch.Tensor) and is_device_tensor(self) and not is_device_tensor(mask):
        raise RuntimeError("expected self and mask to be on the same device, but got mask on cpu and self on cuda:0 "
                           "(CUDA refuses a host mask: build the mask on the device, or move it there first)")


# CUDA's words for a write whose values share memory with the tensor written (at::assert_no_overlap)
ALIASED_WRITE = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                 "single memory location. Please clone() the tensor before performing the operation.")


def _refuse_an_aliased_mask_write(func: Any, args: tuple) -> None:
    """``x[mask] = x[:1]``: CUDA refuses a write whose values share memory with the tensor written.

    With a one-element value in host memory torch would turn the write into ``masked_fill_`` (no check); a device
    value goes through ``index_put_``, whose ``assert_no_overlap`` raises on CUDA. A CPU tensor standing for device
    memory would take the host route silently, so the simulated device raises as CUDA does.
    """
    if func.overloadpacket.__name__ not in ("index_put", "index_put_", "_index_put_impl_") or len(args) < 3:
        return
    self, value = args[0], args[2]
    if not (isinstance(value, torch.Tensor) and is_device_tensor(value) and is_device_tensor(self)):
        return
    if _overlaps(self, value):
        raise RuntimeError(ALIASED_WRITE)


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the memory ``a`` spans and the memory ``b`` spans share a byte (ATen's ``get_overlap_status``)."""
    if a.numel() == 0 or b.numel() == 0 or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False

    def span(t: torch.Tensor) -> tuple[int, int]:
        start = t.storage_offset() * t.element_size()
        extent = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        return start, start + extent * t.element_size()

    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1


def _equal_reads_back(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``torch.equal(a, b)`` reads a value back (ATen's ``cuda_equal``, ATen/native/cuda/Equal.cpp).

    It answers from metadata when the sizes differ, when there is nothing to compare,
    and when ``b`` is ``a`` itself (same storage, offset, strides, dtype and flags); otherwise
    it runs ``eq(a, b).all().item()``.
    """
    if a.shape != b.shape or a.numel() == 0:
        return False
    aliased = (
        a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        and a.storage_offset() == b.storage_offset()
        and a.stride() == b.stride()
        and a.dtype == b.dtype
        and a.layout == b.layout
        and a.is_neg() == b.is_neg()
        and a.is_conj() == b.is_conj()
    )
    return not aliased


def _is_host_scalar(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() == 0 and not is_device_tensor(value)


def _becomes_masked_fill(indices: list, masks: list, value: Any) -> bool:
    """``x[mask] = scalar``: torch turns this assignment into a sync-free ``masked_fill_``.

    (ATen's ``canDispatchToMaskedFill``: one boolean mask, and a one-element value in host memory.)
    """
    return (
        len(masks) == 1
        and all(t is None or t is masks[0] for t in indices)
        and (not isinstance(value, torch.Tensor) or (value.numel() == 1 and not is_device_tensor(value)))
    )


# ----------------------------------------------------------------------------- explicit synchronize calls


@contextmanager
def _watch_explicit_syncs(obs: _Observer) -> Iterator[None]:
    """Count torch.cuda.synchronize / Event.synchronize / Stream.synchronize (GPU only), each as its own kind, and
    the copy pickling a CUDA tensor makes.

    A simulated block counts the simulated device's waits instead (``record_simulated_wait``).
    """
    if not has_cuda() or obs.simulated:
        yield
        return
    patched = [(torch.cuda, "synchronize", SyncKind.DEVICE_SYNC), (torch.cuda.Event, "synchronize", SyncKind.EVENT_SYNC),
               (torch.cuda.Stream, "synchronize", SyncKind.STREAM_SYNC)]
    originals = [getattr(owner, attr) for owner, attr, _ in patched]
    reduce_ex = torch.Tensor.__reduce_ex__

    def wrap(original: Callable, kind: SyncKind) -> Callable:
        def counted(*a: Any, **k: Any) -> Any:
            obs.record(kind, kind.value)
            return original(*a, **k)

        return counted

    def pickled(tensor: torch.Tensor, *a: Any, **k: Any) -> Any:
        """Pickling skips __torch_function__ for a plain tensor and saves a CUDA storage through one blocking copy
        to the host (the debug mode reports it; H100, torch 2.11)."""
        if not (tensor.is_cuda and obs.suppress == 0):  # a tensor with state comes back here once more
            return reduce_ex(tensor, *a, **k)
        obs.record(SyncKind.D2H_COPY, "pickle (the storage copied to the host)")
        obs.suppress += 1
        try:
            return reduce_ex(tensor, *a, **k)
        finally:
            obs.suppress -= 1

    for (owner, attr, kind), original in zip(patched, originals):
        setattr(owner, attr, wrap(original, kind))
    torch.Tensor.__reduce_ex__ = pickled  # type: ignore[method-assign]
    try:
        yield
    finally:
        for (owner, attr, _), original in zip(patched, originals):
            setattr(owner, attr, original)
        torch.Tensor.__reduce_ex__ = reduce_ex  # type: ignore[method-assign]


_ACTIVE_SIMULATED: list[_Observer] = []  # the simulated count_syncs blocks now open (innermost last)


def record_simulated_wait(kind: SyncKind, label: str) -> None:
    """Count an explicit wait of the simulated device (``synclab.sim.cuda``): one of ``EXPLICIT_WAITS``."""
    if kind not in EXPLICIT_WAITS:
        raise ValueError(f"{kind} is not an explicit wait")
    for obs in _ACTIVE_SIMULATED:
        obs.record(kind, label)


def record_simulated_upload(source: torch.Tensor, non_blocking: bool) -> None:
    """Count the copy :func:`synclab.device.to_device` stands in for on a CPU, as CUDA would run it.

    A blocking upload waits for the device; a ``non_blocking`` one from pageable memory is a staging copy.
    """
    kind = SyncKind.H2D_COPY if not non_blocking else None if is_async_host_side(source) else SyncKind.STAGED_COPY
    if kind is None:
        return
    for obs in _ACTIVE_SIMULATED:
        obs.record(kind, "to_device")


_device_module.UPLOAD_OBSERVERS.append(record_simulated_upload)


# ----------------------------------------------------------------------------- allowed regions and CUDA's arming

# Per thread and per asyncio task, as vLLM tracks them since #51455: a new thread starts outside every
# block and every allowed region; a task inherits both from the code that created it.
# the files whose code opened each gpu_sync_allowed() region now open, innermost last
_allowed_by: ContextVar[tuple[str, ...]] = ContextVar("synclab_gpu_sync_allowed_by", default=())
_counting: ContextVar["SyncReport | None"] = ContextVar("synclab_gpu_sync_counting", default=None)
_CUDA_SYNC_WARNING = "called a synchronizing CUDA operation"  # torch's words ("warn" mode)
# Arming the debug mode warns once per process that it is a prototype: the lab arms it on purpose, and the
# warning would land on a notebook's stderr under the first count_syncs of a GPU session.
_CUDA_PROTOTYPE_WARNING = "Synchronization debug mode is a prototype feature"
_arm_lock = threading.Lock()
_arm_count = 0
_mode_before_arming: Any = 0


def allowed_by() -> tuple[str, ...]:
    """The files whose code opened each ``gpu_sync_allowed()`` region open here, innermost last."""
    return _allowed_by.get()


@contextmanager
def gpu_sync_allowed() -> Iterator[None]:
    """A region whose syncs are made on purpose, named as in vLLM (``gpu_sync_allowed()``, since #44800).

    Syncs inside still happen and are still counted; their events carry ``allowed=True`` (and ``allowed_in``, the
    file whose code opened the region) and ``SyncReport.stray`` leaves them out. Regions nest. They are kept in a
    ``ContextVar``, so a region opened on one thread or asyncio task allows nothing on another.
    """
    opener = sys._getframe(1)
    while opener is not None and opener.f_code.co_filename == contextlib.__file__:  # past @contextmanager's frames
        opener = opener.f_back
    token = _allowed_by.set(_allowed_by.get() + (opener.f_code.co_filename if opener is not None else "",))
    try:
        yield
    finally:
        _allowed_by.reset(token)


@contextmanager
def _cuda_armed() -> Iterator[None]:
    """torch's sync debug mode at "warn" while any block is open: the switch is process-wide, so count users."""
    global _arm_count, _mode_before_arming
    with _arm_lock:
        if _arm_count == 0:
            _mode_before_arming = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("warn")
        _arm_count += 1
    try:
        yield
    finally:
        with _arm_lock:
            _arm_count -= 1
            if _arm_count == 0:
                torch.cuda.set_sync_debug_mode(_mode_before_arming)


# ----------------------------------------------------------------------------- the public API


@contextmanager
def count_syncs(simulate: bool | None = None, *, profiler_marks: bool = False) -> Iterator[SyncReport]:
    """Report every host-device synchronisation performed inside the ``with`` block.

    ``simulate`` defaults to True on a CPU-only machine (marked tensors stand for
    device memory) and False on a GPU (CUDA tensors are device memory, and CUDA's
    own sync debug mode is armed as ground truth). ``profiler_marks`` leaves a
    ``PROFILER_MARK`` range in a running ``torch.profiler`` trace at each event
    (:func:`synclab.profiling.profile` sets it: the timeline's sync marks).
    """
    gpu = device_process()
    if gpu is not None:  # the device process counted every transfer: its ledger is the report
        with _counted_by_the_device(gpu) as report:
            yield report
        return
    simulated = (not has_cuda()) if simulate is None else simulate
    obs = _Observer(simulated, profiler_marks)
    report = SyncReport(simulated=simulated)
    # live: a block may watch them grow (chapter 6)
    report.events, report.staged, report.early_reads = obs.events, obs.staged, obs.early_reads
    arm_cuda = has_cuda() and not simulated
    others: list[warnings.WarningMessage] = []

    def hook(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if arm_cuda and _CUDA_PROTOTYPE_WARNING in str(message):
            return
        if arm_cuda and _CUDA_SYNC_WARNING in str(message):
            counting = _counting.get()
            if counting is not None:  # a thread or task outside every block is not counted
                counting.cuda_reported = (counting.cuda_reported or 0) + 1
                counting.cuda_stray = (counting.cuda_stray or 0) + (not _allowed_by.get())
            return
        others.append(warnings.WarningMessage(message, category, filename, lineno, file, line))

    if arm_cuda:
        report.cuda_reported = report.cuda_stray = 0
        torch.cuda.synchronize()  # start from an idle device, outside the counted region
    token = _counting.set(report)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = hook  # restored by catch_warnings on the way out
        if simulated:
            _ACTIVE_SIMULATED.append(obs)
        try:
            with (_cuda_armed() if arm_cuda else nullcontext()), _watch_explicit_syncs(obs), \
                    _DispatchLevel(obs), _FunctionLevel(obs):
                yield report
        finally:
            obs.land()  # what is still in flight has landed by the time anyone reads it outside the block
            if simulated:
                _ACTIVE_SIMULATED.remove(obs)
            _counting.reset(token)
            report.events, report.staged, report.early_reads = obs.events, obs.staged, obs.early_reads
    for w in others:  # hand back the warnings that were not ours to swallow
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


class _EarlyReads(TorchFunctionMode):
    """On the device process: a host op that reads a pinned buffer a download has not landed in yet (the device says
    which landed with each answer). Not a sync: a race, which the reader's side names (``report.early_reads``)."""

    def __init__(self, gpu: Any, report: SyncReport) -> None:
        super().__init__()
        self.gpu, self.report = gpu, report

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = getattr(func, "__name__", "")
        read = args[1:] if name == "copy_" else args  # copy_'s first argument is written, not read
        landing = [a for a in read if isinstance(a, torch.Tensor) and a.device.type == "cpu"
                   and self.gpu.in_flight_buffer(a)] if self.gpu.in_flight else []
        out = func(*args, **(kwargs or {}))
        if landing and not _a_view_of(out, landing):  # a view (reshape, a slice) reads nothing: a read of it later does
            filename, lineno, function, code = _user_frame()
            self.report.early_reads.append(SyncEvent(RaceKind.EARLY_READ, name, filename, lineno, function, code))
        return out


def _a_view_of(out: Any, tensors: list[torch.Tensor]) -> bool:
    """Whether ``out`` is a tensor in the memory of one of ``tensors`` (a view of it, or itself): made without
    reading a value."""
    return isinstance(out, torch.Tensor) and out.untyped_storage().data_ptr() in {
        t.untyped_storage().data_ptr() for t in tensors}


@contextmanager
def _counted_by_the_device(gpu: Any) -> Iterator[SyncReport]:
    """``count_syncs`` on the device process (CONTRIBUTING, "The device process"): the transfers its ledger counted
    while the block ran, as events. Nothing here sees the reader's calls: a read it has no rule for is still a
    transfer, and nothing the reader's code runs can lower the count. Early reads are the reader's side's to see."""
    report = SyncReport(simulated=True)
    start = gpu.transfer_count()
    try:
        with _EarlyReads(gpu, report):
            yield report
    finally:
        for transfer in gpu.transfers_since(start):
            line = transfer.line
            event = SyncEvent(SyncKind(transfer.kind), transfer.kind, getattr(line, "filename", "?"),
                              getattr(line, "lineno", 0), getattr(line, "function", "?"), getattr(line, "code", ""),
                              transfer.nbytes, allowed=bool(getattr(line, "allowed", False)),
                              allowed_in=getattr(line, "allowed_in", ""))
            (report.events if event.kind.waits_for_device else report.staged).append(event)


def syncs_per_call(fn: Callable[..., Any], *args: Any, calls: int = 1, **kwargs: Any) -> float:
    """Average number of syncs one call of ``fn(*args, **kwargs)`` performs (``calls`` calls, one run)."""
    with count_syncs() as report:
        for _ in range(calls):
            fn(*args, **kwargs)
    return report.count / calls
