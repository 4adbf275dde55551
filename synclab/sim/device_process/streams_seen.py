"""What a check sees of the device process's streams: its log, the waits between streams, the races, the copies
still queued, read from the device process by the watcher, from the block's start on.

Taught with chapter 2 (lazy streams) and chapter 3 (pinned transfers), whose checks read what the host asked of the
streams: inside ``running_on(gpu)``, :func:`synclab.sim.cuda.simulated_cuda` yields a :class:`StreamsSeen` of
``gpu`` in place of the in-process simulated device, with the same names (``log``, ``edges``, ``races``,
``streams_created``, ``copies_queued()``, ``held_by()``, ``watch_frees()``), so a check reads either the same way.
Each read asks the device process now: nothing here is kept in the reader's process.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from synclab.device import TensorRef
from synclab.sim.stream_log import SimLog, StreamEdge

_WAITS_FOR = re.compile(r"waits for (.+?)(?: \(an event recorded there\))?$")


class StreamsSeen:
    """The streams of the device process ``gpu``, as the watcher reads them."""

    def __init__(self, gpu: Any) -> None:
        self.gpu = gpu
        seen = gpu.streams_log()  # what came before the block is not the block's, as on a new in-process device
        self._log_start, self._races_start, self._streams_before = len(seen["log"]), len(seen["races"]), \
            seen["streams_made"]

    def _seen(self, freed: tuple[int, ...] = ()) -> dict[str, Any]:
        return self.gpu.streams_log(self._log_start, self._races_start, freed)

    @property
    def log(self) -> SimLog:
        """What the host asked of the streams, in order: ``(what, on which stream, detail)``."""
        return SimLog(list(self._seen()["log"]))  # a copy: the handle keeps the answer until the reader sends again

    @property
    def edges(self) -> list[StreamEdge]:
        """Each ``wait_stream`` and each ``wait_event`` of a recorded event: waiter, waited for, its log entry."""
        edges = []
        for at, (what, stream, detail) in enumerate(self._seen()["log"]):
            found = _WAITS_FOR.match(detail) if what in ("wait_stream", "wait_event") else None
            if found:
                edges.append(StreamEdge(waiter=stream, waits_for=found[1], at=at))
        return edges

    @property
    def races(self) -> list[str]:
        return list(self._seen()["races"])

    @property
    def streams_created(self) -> int:
        """Streams the host created (the default stream is not one of them)."""
        return self._seen()["streams_made"] - self._streams_before

    def memory_kept(self, refs: list[TensorRef]) -> bool:
        """Whether the memory of every tensor of ``refs`` is still kept: the reader's code holds the tensor, or a
        ``record_stream`` holds its memory for a stream that still has copies queued."""
        held = self.gpu.streams_state()["held"]
        return all(ref() is not None or ref.memory in held for ref in refs)

    def watch_frees(self, refs: list[TensorRef]) -> tuple[tuple[int, ...], int]:
        """From now on: when the host lets go of each tensor of ``refs`` still held (the device process notes where
        in its log)."""
        return tuple(ref.memory for ref in refs if ref() is not None), len(self._seen()["log"])

    def freed_before_a_wait(self, watched: tuple[tuple[int, ...], int]) -> int:
        """How many of the tensors :meth:`watch_frees` watched the host let go of before it next waited."""
        ids, start = watched
        seen = self._seen(ids)
        waited = [what == "host waits" for what, _, _ in seen["log"]]
        return sum(not any(waited[start:at - self._log_start]) for at in seen["frees"].values())

    def copies_queued(self) -> set[tuple[int, int]]:
        """The downloads queued on any stream and not run yet, each by its stream and place there."""
        return self.gpu.streams_state()["copies_queued"]

    def held_by(self, tensors: Iterable[Any]) -> list[str]:
        """The streams whose ``record_stream`` holds one of ``tensors`` while they still have copies queued."""
        held = self.gpu.streams_state()["held"]
        return sorted({name for t in tensors for name in held.get(getattr(t, "_id", None), ())})
