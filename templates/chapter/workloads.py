"""Chapter N (<pattern>): what the chapter runs: the inputs, batches and steps the checks and profiles share.

A room of :mod:`synclab.CHAPTER`. It imports from below the chapters only (``synclab.engine``, ``synclab.device``).
"""

from __future__ import annotations

import torch

from synclab.device import to_device


def make_inputs(n: int) -> torch.Tensor:
    """``n`` values in device memory (on a CPU-only machine: marked, so count_syncs sees them)."""
    return to_device(torch.arange(n))  # [n] device
