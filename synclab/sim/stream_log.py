"""The log of what the host asked of the streams, in order, and the waits between streams it holds.

Taught in chapter 2 (lazy streams): a check reads the order in which copies, events and waits were asked for,
from the in-process simulated device (:mod:`synclab.sim.cuda`) or from the device process
(:mod:`synclab.sim.device_process.streams_seen`), in these same words.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class StreamEdge:
    """One ``waiter.wait_stream(waits_for)``, logged at entry ``at``: which way the ordering goes."""

    waiter: str
    waits_for: str
    at: int
