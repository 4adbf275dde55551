"""Chapter {{n}} ({{title}}): what the chapter runs: the inputs, batches and steps the checks and profiles share.

A room of :mod:`synclab.{{slug}}`. It imports from below the chapters only (``synclab.engine``, ``synclab.device``).
"""

from __future__ import annotations

import torch

from synclab.device import to_device


def make_inputs(n: int) -> torch.Tensor:
    """``n`` values in device memory (on a CPU-only machine: marked, so count_syncs sees them)."""
    return to_device(torch.arange(n, dtype=torch.float32))  # [n] device


def sum_read_back(values: torch.Tensor) -> torch.Tensor:
    """The code before the fix: the sum read back to the host, then sent up again (two syncs a call)."""
    return to_device(torch.tensor(values.sum().item()))  # [] device, by way of a Python float
