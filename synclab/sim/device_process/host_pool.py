"""Pinned host memory as a caching host allocator keeps it: blocks carved from a few segments both processes map.

Taught with chapter 3 (pinned memory). A pinned buffer is host memory the device process maps too
(:meth:`~.handle.SimulatedGPU.pinned`). Made one by one, each was a shared-memory file whose descriptor crossed a
socket to the device process: about 0.8 ms a buffer here, and a check makes thousands (every ``pin_memory=True``
tensor of the engine's metadata). Here a segment crosses once, and a buffer is a block of it named by its place
(CUDA's caching host allocator keeps pinned blocks for reuse the same way). A block comes back for reuse only once
the device process has released it: a copy it still had queued could write it.

Each block is a tensor of its own storage (``torch.frombuffer``), so a buffer's storage says which block it is, and
whether the host still holds it.
"""

from __future__ import annotations

import math
from typing import Any

import torch

ALIGN = 64  # bytes: every block starts on a cache line, so any dtype's view of it is aligned
FIRST_SEGMENT = 1 << 22  # bytes (4 MiB); each further segment doubles, or fits the block asked for


def block_of(segment: Any, offset: int, size: int) -> torch.Tensor:
    """The block of ``segment`` (the NumPy view of a uint8 tensor in shared memory) at ``offset``: [size] uint8, a
    storage of its own."""
    return torch.frombuffer(segment, dtype=torch.uint8, count=size, offset=offset)


def as_buffer(block: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """The block's first bytes as a contiguous tensor of ``shape`` and ``dtype``."""
    return block[:math.prod(shape) * dtype.itemsize].view(dtype).reshape(shape)


class HostPool:
    """The reader's side: segments, and the blocks free for reuse by size (sizes are powers of two)."""

    def __init__(self) -> None:
        self.segments: list[torch.Tensor] = []  # each [bytes] uint8, in shared memory
        self.arrays: list[Any] = []  # each segment's NumPy view, which blocks are made from
        self._top = 0  # bytes used in the last segment, from its start
        self._free: dict[int, list[tuple[int, int]]] = {}  # a block size: (segment, offset) of blocks released

    def allocate(self, nbytes: int) -> tuple[int, int, int, torch.Tensor | None]:
        """A block of at least ``nbytes``: its segment, offset and size, and the segment when it is new (the device
        process must be sent it before the block is named)."""
        size = max(ALIGN, 1 << max(nbytes - 1, 0).bit_length())
        if self._free.get(size):
            segment, offset = self._free[size].pop()
            return segment, offset, size, None
        new = None
        if not self.segments or self._top + size > self.segments[-1].numel():
            last = self.segments[-1].numel() if self.segments else FIRST_SEGMENT // 2
            new = torch.zeros(max(2 * last, size), dtype=torch.uint8).share_memory_()
            self.segments.append(new)
            self.arrays.append(new.numpy())
            self._top = 0
        offset, self._top = self._top, self._top + size
        return len(self.segments) - 1, offset, size, new

    def release(self, segment: int, offset: int, size: int) -> None:
        """A block the device process no longer uses: free for the next buffer of its size."""
        self._free.setdefault(size, []).append((segment, offset))
