"""Where and when a measurement was taken: every figure and result file carries this.

Used by :mod:`synclab.timing`, :mod:`synclab.figures` and the reference results
(``python -m synclab bench``); introduced in chapter 0.
"""

from __future__ import annotations

import datetime as _dt
import platform
import re
from dataclasses import asdict, dataclass

import torch

from synclab.device import device_name, has_cuda


@dataclass(frozen=True)
class Provenance:
    device: str  # "NVIDIA H100 80GB HBM3" or "cpu"
    is_gpu: bool
    torch_version: str
    date: str  # ISO date, UTC
    host: str  # CPU model / machine, for CPU runs
    threads: int = 0  # torch intra-op threads the measurement ran with (0: not recorded)

    @classmethod
    def here(cls) -> "Provenance":
        return cls(
            device=device_name(),
            is_gpu=has_cuda(),
            torch_version=torch.__version__,
            date=_dt.datetime.now(_dt.timezone.utc).date().isoformat(),
            host=platform.processor() or platform.machine(),
            threads=torch.get_num_threads(),
        )

    @property
    def label(self) -> str:
        """Short label for a figure title: ``cpu (no GPU), 1 torch thread · torch 2.13.0+cpu · 2026-11-21``."""
        device = self.device
        if not self.is_gpu:
            device += " (no GPU)" + (f", {self.threads} torch thread{'s' * (self.threads > 1)}" if self.threads else "")
        return f"{device} · torch {self.torch_version} · {self.date}"

    @property
    def slug(self) -> str:
        """File-system name for the device, e.g. ``nvidia-h100-80gb-hbm3``."""
        return re.sub(r"[^a-z0-9]+", "-", self.device.lower()).strip("-")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Provenance":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
