"""The transfers the device process performed for the host, counted where the reader's code cannot reach them.

Taught with chapter 0's sync table: each transfer has a kind (:class:`synclab.syncs.SyncKind`'s values), the line of
the reader's code that asked for it (as the reader's side named it: a label, which a reader could mislabel but not
uncount), and the bytes that crossed. Beside them: the host's ops, the streams it made, what it asked of streams
and events (chapter 2), and the races the device saw (a stream that used data no wait had ordered it after).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Transfer:
    kind: str  # a SyncKind value: "item", "tolist", "blocking device-to-host copy", ...
    line: Any  # the reader's line (a wire.Line, as the reader's side sent it)
    nbytes: int

    @property
    def where(self) -> str:
        """``synclab/engine/engine_core.py:210 in synchronize: self.event.synchronize()``"""
        return str(self.line)


@dataclass
class Ledger:
    transfers: list[Transfer] = field(default_factory=list)
    ops: int = 0  # ops the host queued on the device: the host's work on device tensors
    streams_made: int = 0  # side streams the host created (the default stream is not one)
    log: list[tuple[str, str, str]] = field(default_factory=list)  # (what, on which stream, detail): streams' work
    races: list[str] = field(default_factory=list)  # data a stream used before a wait ordered it there
    frees: dict[int, int] = field(default_factory=dict)  # a tensor the host let go: how long the log was then

    def record(self, kind: str, where: Any, nbytes: int) -> None:
        self.transfers.append(Transfer(kind, where, nbytes))

    def by_kind(self) -> dict[str, int]:
        return dict(Counter(t.kind for t in self.transfers))
