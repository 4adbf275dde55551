"""The device process: the device's data, the ops the host queued, and every transfer back, counted here.

Taught with chapter 0's sync table. The reader's side (:mod:`.handle`) sends two kinds of message on its connection:
ops, which it does not wait for (the device runs them in the order they came, as a stream does), and requests for
data, which it waits for: a transfer, recorded in the :class:`~.ledger.Ledger` with its kind and the reader's line.
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

    def run(self, name: str, args: tuple, kwargs: dict, out_ids: list[int]) -> Any:
        self.ledger.ops += 1
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


def handle(state: DeviceState, message: tuple) -> tuple[bool, Any]:
    """One message from the reader's side: (whether it is answered, the answer)."""
    verb = message[0]
    if verb == "batch":  # ("batch", [message, ...]): ops and frees, none answered
        for queued in message[1]:
            handle(state, queued)
        return False, None
    if verb == "op":  # ("op", name, args, kwargs, out_ids)
        state.run(*message[1:])
        return False, None
    if verb == "free":  # ("free", ids)
        for id_ in message[1]:
            state.data.pop(id_, None)
        return False, None
    if verb == "upload":  # ("upload", id, HostBytes, kind or "", where)
        _, id_, host, kind, where = message
        state.data[id_] = on_the_device(host, state.data)
        if kind:  # a synchronous upload: the host waited for it
            state.ledger.record(kind, where, len(host.data))
        return False, None
    if verb == "write":  # ("write", Ref, HostBytes, kind or "", where): a host tensor copied into a device one
        _, ref, host, kind, where = message
        state.data[ref.id].copy_(on_the_device(host, state.data))
        if kind:
            state.ledger.record(kind, where, len(host.data))
        return False, None
    if verb == "count":  # ("count", kind, where, nbytes): a transfer made inside an op (a host index uploaded)
        state.ledger.record(message[1], message[2], message[3])
        return False, None
    if verb == "read":  # ("read", kind, Ref or [Ref], where)
        return True, state.transfer(message[1], message[3], message[2])
    if verb == "sized":  # ("sized", kind, name, args, kwargs, out_ids, where): an op whose output size is data
        _, kind, name, args, kwargs, out_ids, where = message
        leaves = state.run(name, args, kwargs, out_ids)
        if leaves is None:
            raise RuntimeError(state.error)
        state.ledger.record(kind, where, 8 * len(leaves))  # the sizes cross, not the values
        return True, [(tuple(t.shape), tuple(t.stride()), t.storage_offset(), str(t.dtype).removeprefix("torch."))
                      for t in leaves]
    raise ValueError(f"the device process has no message {verb!r}")


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
