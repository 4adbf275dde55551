"""The device process: the device's data, the ops the host queued, and every transfer back, counted here.

Taught with chapter 0's sync table. The reader's side (:mod:`.handle`) sends two kinds of message on its connection:
ops, which it does not wait for (the device queues them, and runs them in order when the host next waits), and
requests for data, which it waits for: a transfer, recorded in the :class:`~.ledger.Ledger` with its kind and the
reader's line. Pinned host buffers are memory both processes map: a copy into one lands when the queue runs.
A watcher (a check, the grader) reads the ledger over a connection of its own. Nothing the reader's connection can
send lowers a count: it has no message that resets, edits or reads the ledger.
"""

from __future__ import annotations

from multiprocessing.connection import Connection, wait
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from synclab.sim.device_process.ledger import Ledger
from synclab.sim.device_process.wire import Ref, on_the_device, pack, register_device_name, resolve


class DeviceState:
    """The device's memory (tensors by id), the ledger, and the first error a queued op raised."""

    def __init__(self) -> None:
        self.data: dict[int, torch.Tensor] = {}
        self.ledger = Ledger()
        self.error: str = ""  # as on a GPU, a queued op's error surfaces at the next transfer
        self.queue: list[tuple] = []  # what the host queued, run when it waits
        self.pinned: dict[int, torch.Tensor] = {}  # pinned host buffers, in memory both processes share

    def drain(self) -> None:
        queue, self.queue = self.queue, []
        for message in queue:
            try:
                run_queued(self, message)
            except Exception as exc:  # noqa: BLE001 - reported at the next transfer, as a device error is
                self.error = self.error or f"{message[0]}: {type(exc).__name__}: {exc}"

    def pinned_view(self, view: Any) -> torch.Tensor:
        return self.pinned[view.pid].as_strided(view.shape, view.stride, view.offset)

    def run(self, name: str, args: tuple, kwargs: dict, out_ids: list[int]) -> Any:
        try:
            out = resolve(name)(*on_the_device(args, self.data), **on_the_device(kwargs, self.data))
        except Exception as exc:  # noqa: BLE001 - reported at the next transfer, as a device error is
            self.error = self.error or f"{name}: {type(exc).__name__}: {exc}"
            return None
        leaves = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        for id_, tensor in zip(out_ids, leaves):
            self.data[id_] = tensor
        return leaves

    def transfer(self, kind: str, where: str, value: Any) -> Any:
        """``value`` (a Ref, or a list of them) brought to the host, recorded as one transfer of ``kind``."""
        if self.error:
            raise RuntimeError(f"an op queued earlier failed on the device: {self.error}")
        tensors = [self.data[r.id] for r in (value if isinstance(value, list) else [value])]
        self.ledger.record(kind, where, sum(t.numel() * t.element_size() for t in tensors))
        return [pack(t) for t in tensors] if isinstance(value, list) else pack(tensors[0])


# what the host waits for: a message of one of these kinds runs everything queued before it first
_WAITS = {"item", "tolist", "bool", "tensor-bounded slice", "data-dependent output size", "boolean-mask indexing",
          "blocking device-to-host copy", "synchronous host-to-device copy", "non_blocking copy into pageable memory",
          "print", "Stream.synchronize", "Event.synchronize", "torch.cuda.synchronize"}


def handle(state: DeviceState, message: tuple) -> tuple[bool, Any]:
    """One message from the reader's side: (whether it is answered, the answer).

    The device runs what is queued only when the host waits (a read, a blocking copy, a synchronize): the latest a
    GPU could, so that every read of a buffer before its copy has landed, and every pinned buffer refilled before its
    upload ran, shows. A transfer's kind is recorded when the message comes: the host waited then."""
    verb = message[0]
    if verb == "batch":  # ("batch", [message, ...]): none answered
        for queued in message[1]:
            handle(state, queued)
        return False, None
    if verb in ("op", "free", "to_pinned", "from_pinned"):
        state.ledger.ops += verb == "op"  # the host's work: counted when it is queued, as the host did it then
        state.queue.append(message)
        return False, None
    if verb == "pin":  # ("pin", pid, tensor in shared memory): a pinned host buffer, which both processes see
        state.pinned[message[1]] = message[2]
        return False, None
    if verb in ("upload", "write", "count"):
        kind, where, nbytes = (message[1], message[2], message[3]) if verb == "count" else \
            (message[3], message[4], len(message[2].data))
        if kind in _WAITS:
            state.drain()
        if kind:
            state.ledger.record(kind, where, nbytes)
        if verb != "count":
            state.queue.append(message)
        return False, None
    state.drain()
    if verb == "read":  # ("read", kind, Ref or [Ref], where)
        return True, state.transfer(message[1], message[3], message[2])
    if verb == "sync":  # ("sync", kind, where): a wait for the device, nothing copied
        state.ledger.record(message[1], message[2], 0)
        return True, None
    if verb == "sized":  # ("sized", kind, name, args, kwargs, out_ids, where): an op whose output size is data
        _, kind, name, args, kwargs, out_ids, where = message
        state.ledger.ops += 1
        leaves = state.run(name, args, kwargs, out_ids)
        if leaves is None:
            raise RuntimeError(state.error)
        state.ledger.record(kind, where, 8 * len(leaves))  # the sizes cross, not the values
        return True, [(tuple(t.shape), tuple(t.stride()), t.storage_offset(), str(t.dtype).removeprefix("torch."))
                      for t in leaves]
    raise ValueError(f"the device process has no message {verb!r}")


def run_queued(state: DeviceState, message: tuple) -> None:
    """One queued message, run when the host waits."""
    verb = message[0]
    if verb == "op":  # ("op", name, args, kwargs, out_ids)
        state.run(*message[1:])
    elif verb == "free":  # ("free", ids)
        for id_ in message[1]:
            state.data.pop(id_, None)
    elif verb == "upload":  # ("upload", id, HostBytes, kind, where)
        state.data[message[1]] = on_the_device(message[2], state.data)
    elif verb == "write":  # ("write", Ref, HostBytes, kind, where): a host tensor copied into a device one
        state.data[message[1].id].copy_(on_the_device(message[2], state.data))
    elif verb == "to_pinned":  # ("to_pinned", PinnedView, Ref): a download lands in pinned memory
        state.pinned_view(message[1]).copy_(state.data[message[2].id])
    elif verb == "from_pinned":  # ("from_pinned", Ref, PinnedView): an upload reads pinned memory as it runs
        state.data[message[1].id].copy_(state.pinned_view(message[2]))


def serve(reader: Connection, watcher: Connection) -> None:
    """Answer the reader's side and the watcher until the watcher says stop (or either goes away)."""
    torch.set_num_threads(1)
    register_device_name()
    state = DeviceState()
    while True:
        for conn in wait([reader, watcher]):
            try:
                message = conn.recv()
            except EOFError:
                return
            except Exception as exc:  # noqa: BLE001 - a message that cannot be read: the ops in it are lost
                state.error = state.error or f"a message the device could not read: {type(exc).__name__}: {exc}"
                continue
            if conn is watcher:
                if message == ("stop",):
                    return
                if message == ("ledger",):
                    watcher.send((list(state.ledger.transfers), state.ledger.ops))
                continue
            try:
                answered, answer = handle(state, message)
            except Exception as exc:  # noqa: BLE001 - the reader's side raises it where it asked
                answered, answer = isinstance(message, tuple) and message[:1] in (("read",), ("sized",)), exc
            if answered:
                reader.send(answer)
