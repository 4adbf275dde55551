"""Which device the lab runs on, and how a CPU-only machine stands in for a GPU.

Taught in chapter 0 (the primer); every later chapter imports it. Chapter 3's rule of which copies between host and
device go through a pageable temporary (:func:`copies_as_they_lie`) lives here too: both simulated devices and
``count_syncs`` on CUDA read it.

On a machine with CUDA, "device memory" is simply CUDA memory. On a CPU-only
machine the lab still needs to know which tensors *stand for* device memory, so
that :func:`synclab.syncs.count_syncs` can report the synchronisations the same
code would perform on a GPU. Such tensors are ordinary CPU tensors carrying a
marker attribute; :func:`to_device` sets it, and inside ``count_syncs`` every
tensor computed from a marked tensor is marked too. The simulated device itself
is :data:`SIM_DEVICE`, a ``str`` equal to ``"cpu"`` that torch accepts anywhere
a device is expected and that ``count_syncs`` recognises.
"""

from __future__ import annotations

import os
import types
import weakref
from functools import lru_cache
from typing import Any, Callable, Union

import torch

from synclab.run_modes import DEVICE_ENV, SIMULATED  # the variable and its value, read here by many

DeviceLike = Union[str, torch.device]

_MARK = "_synclab_on_device"


class SimulatedDevice(str):
    """The CPU standing in for a GPU: ``torch`` sees ``"cpu"``; ``count_syncs`` sees a device."""

    @property
    def type(self) -> str:  # mirrors torch.device.type, so `device.type == "cuda"` stays honest
        return "cpu"

    @property
    def index(self) -> None:
        return None

    def __repr__(self) -> str:
        return "SimulatedDevice('cpu')"


SIM_DEVICE = SimulatedDevice("cpu")


def device_is_pinned_to_simulation() -> bool:
    """True when ``SYNCLAB_DEVICE=sim`` hides the GPU from the lab."""
    return os.environ.get(DEVICE_ENV, "") == SIMULATED


# torch's own question, kept apart (a copy of the function, its code included): inside the simulated GPU
# (synclab.sim.cuda) ``torch.cuda.is_available()`` answers True to the reader's code, as a GPU machine would, and the
# lab must still know whether a real one is there
_CUDA_REALLY_AVAILABLE = types.FunctionType(torch.cuda.is_available.__code__, torch.cuda.is_available.__globals__,
                                            "is_available", torch.cuda.is_available.__defaults__,
                                            torch.cuda.is_available.__closure__)


def has_cuda() -> bool:
    """True when a real CUDA (or ROCm) GPU is usable, and ``SYNCLAB_DEVICE=sim`` does not hide it."""
    return not device_is_pinned_to_simulation() and _CUDA_REALLY_AVAILABLE()


def is_cuda_alike() -> bool:
    """vLLM's ``current_platform.is_cuda_alike()``: CUDA or ROCm, where streams and events exist."""
    return has_cuda()


_DEVICE_PROCESS: list = []  # SimulatedGPUs, set by synclab.sim.device_process.machine.running_on (innermost last)


def device_process() -> Any:
    """The simulated GPU in a process of its own that ``running_on`` made the device, or None."""
    return _DEVICE_PROCESS[-1] if _DEVICE_PROCESS else None


def runs_on_device_process() -> bool:
    """True inside ``running_on(gpu)``: the simulated GPU in a process of its own (being built: CONTRIBUTING, "The
    device process") is the device, in place of the in-process one."""
    return bool(_DEVICE_PROCESS)


def pick_device() -> DeviceLike:
    """``torch.device("cuda")`` when a GPU is there, else the simulated device: the device process's inside
    ``running_on(gpu)``, else the one on the CPU."""
    if _DEVICE_PROCESS:
        return _DEVICE_PROCESS[-1].device
    return torch.device("cuda") if has_cuda() else SIM_DEVICE


def simulated_device() -> DeviceLike:
    """Where a check puts its tensors under simulated streams (chapters 2 and 3): the device process's device
    inside ``running_on(gpu)``, else :data:`SIM_DEVICE` (on a GPU machine too: real CUDA work stays outside)."""
    return _DEVICE_PROCESS[-1].device if _DEVICE_PROCESS else SIM_DEVICE


class TensorRef(weakref.ref):
    """A weak reference to a tensor that remembers which device memory it named (``memory``: the device process's
    id for it, else None), so that a check can ask the device about that memory once the tensor is gone (chapter 2:
    is it kept for the stream still copying it?)."""

    __slots__ = ("memory",)

    def __init__(self, tensor: torch.Tensor) -> None:
        super().__init__(tensor)
        self.memory = getattr(tensor, "_id", None)


def is_simulated(device: object) -> bool:
    """True for the CPU standing in for a device (and for tensors' ``.device`` inside ``count_syncs``)."""
    return isinstance(device, SimulatedDevice)


def is_host(device: object) -> bool:
    """True for host memory (``"cpu"``), False for a GPU and for the simulated device.

    vLLM asks ``torch.device(device).type == "cuda"``; on a CPU-only machine the simulated
    device is a CPU in disguise, so the lab asks this instead (chapter 3, Exercise 3.7).
    """
    return not is_simulated(device) and torch.device(device).type == "cpu"


def _probe_pin_memory() -> bool:
    return has_cuda() and _pinning_works()


@lru_cache(maxsize=1)
def _pinning_works() -> bool:
    if "microsoft" in os.uname().release.lower():  # WSL: pinning is unreliable, vLLM turns it off
        return False
    try:
        torch.empty(1, pin_memory=True)
    except RuntimeError:
        return False
    return True


_FORCED_PINNING: list[bool] = []  # set by synclab.sim.pinning.simulated_pinning (innermost last)


def is_pin_memory_available() -> bool:
    """Whether page-locked host memory can be allocated (vLLM: false on WSL and without a GPU).

    Inside :func:`synclab.sim.pinning.simulated_pinning` the answer is the one
    that block simulates (chapter 3 checks both a GPU machine and the WSL case).
    """
    _PIN_QUESTIONS[0] += 1
    return pinning_answer()


def pinning_answer() -> bool:
    """:func:`is_pin_memory_available`'s answer, for the lab's own instruments: not counted as the reader's question."""
    if _FORCED_PINNING:
        return _FORCED_PINNING[-1]
    return _probe_pin_memory()


_PIN_QUESTIONS = [0]  # how often is_pin_memory_available() was asked: chapter 3's hints tell a call-time question
#                       from a value read before the simulated machine existed (a module constant, vLLM's PIN_MEMORY)


def pin_questions() -> int:
    """How many times :func:`is_pin_memory_available` has been asked in this process (chapter 3's checks)."""
    return _PIN_QUESTIONS[0]



def pinning_is_simulated() -> bool:
    """True inside ``simulated_pinning``: whether pinning is possible is then decided there."""
    return bool(_FORCED_PINNING)


PIN_INTENT = "_synclab_pin_intent"  # on a host tensor: pinned, simulated as pinned, or asked for as pinned


def is_pinned_host(tensor: torch.Tensor) -> bool:
    """Page-locked host memory (or, simulated / without a GPU, memory asked for as pinned)."""
    if getattr(tensor, PIN_INTENT, False) or (tensor._base is not None and getattr(tensor._base, PIN_INTENT, False)):
        return True  # the tensor, or the buffer it is a view of (buf[:n] of a pinned buf is pinned too)
    return tensor.device.type == "cpu" and tensor.is_pinned()


# Which copies between host and device go through a pageable temporary that PyTorch makes (chapter 3).
#
# A ``non_blocking`` copy from pinned memory is one ``cudaMemcpyAsync`` only when the driver can move the bytes as
# they lie. When it cannot, PyTorch's CUDA copy (``copy_kernel_cuda`` in ``aten/src/ATen/native/cuda/Copy.cu``)
# first makes the host side contiguous in a new tensor, in pageable memory, and copies from that: a staging copy on
# the way up, a wait on the way down, although the caller's tensor is pinned. The rule, as that file has it:
#
# * the copy is one memcpy when both sides have the same dtype and the same dense layout: TensorIterator reorders
#   and merges the dimensions, and sees one contiguous run (a transposed tensor copied into a transposed one);
# * otherwise the host side, broadcast to the copy's shape, is made ``.contiguous()`` on the host: a new, pageable
#   tensor, unless it is contiguous already (a dtype change of a contiguous tensor then runs on the device).
#
# ``t.to(device)`` makes the device tensor with ``t``'s strides when ``t`` is dense (``_to_copy``): a transposed pinned
# tensor goes up in one copy, transposed on the device too; a slice of a wider tensor's columns (``buf[:, :n]``)
# has gaps, and goes through the temporary.


def is_dense(shape: tuple[int, ...] | torch.Size, strides: tuple[int, ...]) -> bool:
    """Whether a layout covers its memory without gaps or overlaps, in some order of its dimensions
    (``Tensor.is_non_overlapping_and_dense``): a transposed tensor is dense, a slice of a wider row is not."""
    expected = 1
    for size, stride in sorted((p for p in zip(shape, strides) if p[0] != 1), key=lambda p: p[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _alike(shape: tuple[int, ...] | torch.Size, a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """The same strides wherever a dimension has more than one element (a size-1 dimension's stride is moot)."""
    return all(x == y for size, x, y in zip(shape, a, b) if size != 1)


def copies_as_they_lie(host: torch.Tensor, device_side: torch.Tensor | None = None,
                       dtype: torch.dtype | None = None) -> bool:
    """Whether a copy between ``host`` and ``device_side`` moves ``host``'s own bytes, with no pageable temporary.

    ``device_side`` left out: the tensor ``host.to(device, dtype=dtype)`` makes (``host``'s strides where ``host`` is
    dense). Only its shape, strides and dtype are read, so a device process's handle serves as well as a tensor.
    """
    if device_side is None:
        shape, dtype = tuple(host.shape), dtype or host.dtype
        device_strides = tuple(host.stride()) if is_dense(host.shape, host.stride()) else None
    else:
        shape, dtype, device_strides = tuple(device_side.shape), device_side.dtype, tuple(device_side.stride())
    if host.numel() == 0:  # nothing to copy: no memcpy, no temporary
        return True
    try:
        side = host.expand(shape)  # [*shape]: the host side as the copy reads it (a broadcast source has stride 0)
    except RuntimeError:  # shapes that do not broadcast: the copy itself raises, with torch's words
        return False
    one_run = (dtype == host.dtype and device_strides is not None and is_dense(shape, side.stride())
               and is_dense(shape, device_strides) and _alike(shape, side.stride(), device_strides))
    return one_run or side.is_contiguous()


def is_async_host_side(tensor: torch.Tensor, device_side: torch.Tensor | None = None,
                       dtype: torch.dtype | None = None) -> bool:
    """Whether a ``non_blocking`` copy between this host tensor and ``device_side`` runs without the host (chapter 3).

    Pinned, and copied as it lies (:func:`copies_as_they_lie`): a view of a pinned buffer with gaps
    (``pinned[:, :n]``) goes through a pageable temporary PyTorch makes, as pageable memory does. ``device_side``
    left out: the tensor ``tensor.to(device, dtype=dtype)`` makes."""
    return is_pinned_host(tensor) and copies_as_they_lie(tensor, device_side, dtype)


# Called with (source, non_blocking) for each simulated upload. synclab.syncs adds its recorder here:
# this module sits below it and imports nothing of it.
UPLOAD_OBSERVERS: list[Callable[[torch.Tensor, bool], None]] = []


_TORCH_DIR = os.path.dirname(torch.__file__)
# The lab's device layer: this module and the simulated hardware (synclab/sim/). Its torch calls stand in for what
# CUDA does below the engine (marking simulated device memory, landing a simulated copy) and differ between a GPU
# and the simulated device, so the counters of host work (chapters 5 and 6) leave them out.
_DEVICE_LAYER = (os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim") + os.sep, os.path.abspath(__file__))


# Code of the device layer that stands for torch's own methods (a device-process tensor's __getitem__, its reads):
# skipped as torch's frames are, so that the call is the line's that made it (synclab.sim.device_process.handle)
TORCH_METHODS_OF_THE_DEVICE: set = set()


def called_from_device_layer(frame: object) -> bool:
    """Whether the first frame outside torch at or above ``frame`` belongs to the lab's device layer."""
    while frame is not None and (frame.f_code.co_filename.startswith(_TORCH_DIR)  # type: ignore[attr-defined]
                                 or frame.f_code in TORCH_METHODS_OF_THE_DEVICE):  # type: ignore[attr-defined]
        frame = frame.f_back  # type: ignore[attr-defined]
    if frame is None:
        return False
    filename = os.path.abspath(frame.f_code.co_filename)  # type: ignore[attr-defined]
    return filename.startswith(_DEVICE_LAYER[0]) or filename == _DEVICE_LAYER[1]


def _device_process_of(tensor: torch.Tensor) -> Any:
    """The device process that holds ``tensor`` (a ``DeviceTensor`` of :mod:`synclab.sim.device_process`, which
    imports this module), or None."""
    gpu = getattr(tensor, "_gpu", None)
    return gpu if gpu is not None and tensor.device == getattr(gpu, "device", None) else None


def read_back_together(tensors: list[torch.Tensor]) -> dict[int, torch.Tensor]:
    """The host copies (``t.detach().to("cpu")``) of those of ``tensors`` the device process holds, by ``id(t)``, read
    in one round trip: each still one blocking copy, counted as that call counts it. The others are the caller's to
    read. A check that reads many outputs back uses it (chapter 1's poolers, through
    :func:`synclab.answer_keys.plain_data.tensors_as_data`)."""
    held = [t for t in tensors if _device_process_of(t) is not None]
    by_gpu: dict[int, list[torch.Tensor]] = {}
    for t in held:
        by_gpu.setdefault(id(t._gpu), []).append(t)
    return {id(t): host for group in by_gpu.values()
            for t, host in zip(group, group[0]._gpu.download_all([t.detach() for t in group]))}


def to_device(tensor: torch.Tensor, device: DeviceLike | None = None, non_blocking: bool = False) -> torch.Tensor:
    """Put ``tensor`` in device memory: a real copy to CUDA, or a marked copy on the CPU.

    Use it to build the inputs a lab treats as device-resident (``hidden_states``,
    ``*_gpu`` tensors). Host-side metadata (``*_cpu`` tensors) stays unmarked.
    ``non_blocking=True`` is for a source in pinned memory (chapter 3): the host
    does not wait, and the source must stay unchanged until the copy has run.
    """
    device = pick_device() if device is None else device
    if is_simulated(device) or torch.device(device).type == "cpu":
        if not is_device_tensor(tensor):
            for observe in UPLOAD_OBSERVERS:  # count_syncs: the copy a GPU would make
                observe(tensor, non_blocking)
        out = tensor.detach().clone()
        setattr(out, _MARK, True)
        return out
    return tensor.to(device, non_blocking=non_blocking)


def mark_device(tensor: torch.Tensor) -> torch.Tensor:
    """Mark an existing CPU tensor as standing for device memory (in place; returns it)."""
    if tensor.device.type == "cpu":
        setattr(tensor, _MARK, True)
    return tensor


def unmark_device(tensor: torch.Tensor) -> torch.Tensor:
    """Make a marked CPU tensor plain host memory again (in place; returns it)."""
    if hasattr(tensor, _MARK):
        delattr(tensor, _MARK)
    return tensor


def mark_like(tensor: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """Mark ``tensor`` when ``source`` stands for device memory: for views and results made outside ``count_syncs``."""
    if getattr(source, _MARK, False):
        mark_device(tensor)
    return tensor


def is_device_tensor(tensor: torch.Tensor) -> bool:
    """True for tensors in (real or simulated) device memory; False for host tensors."""
    if tensor.device.type != "cpu" or getattr(tensor, _MARK, False):
        return True
    return tensor._base is not None and getattr(tensor._base, _MARK, False)  # a view of device memory


def device_name() -> str:
    """A human label for the device measurements come from, e.g. ``NVIDIA H100 80GB HBM3`` or ``cpu``."""
    if has_cuda():
        return torch.cuda.get_device_name()
    return "cpu"


_SIMULATED_GPU: list[bool] = []  # non-empty inside synclab.sim.cuda.simulated_cuda (which sets it)


def synchronize() -> None:
    """Wait for all queued device work (a no-op on the CPU, where work runs eagerly; the simulated GPU's wait, counted
    as a GPU's is, inside :func:`synclab.sim.cuda.simulated_cuda`)."""
    if has_cuda() or _SIMULATED_GPU:
        torch.cuda.synchronize()


def host_wait_event(enable_timing: bool = False) -> "torch.cuda.Event":
    """A CUDA event the host will wait on, created ``blocking=True``: the waiting thread sleeps.

    Taught in chapter 2, used by the GPU loops of chapters 4 and 5. A default event's
    ``synchronize()`` spins on the driver, holding a core and the driver's lock; vLLM's
    pooling runner creates its ``prepare_inputs_event`` blocking for that reason (under
    tensor parallelism the polling made ranks stragglers). In a loop whose host has
    nothing else to do while it waits, sleeping costs the wake-up latency of an
    interrupt (microseconds) and changes no comparison: every variant waits the same way.
    """
    return torch.cuda.Event(enable_timing=enable_timing, blocking=True)
