"""Where and when a measurement was taken: every figure and result file carries this.

Used by :mod:`synclab.timing`, :mod:`synclab.figures` and the reference results
(``python -m synclab bench``); introduced in chapter 0.
"""

from __future__ import annotations

import ctypes
import os
import datetime as _dt
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

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
    cuda_runtime: str = ""  # GPU runs: the CUDA runtime torch runs on, e.g. "12.8"
    driver: str = ""  # GPU runs: the NVIDIA driver, e.g. "570.86.15" (or "CUDA 12.8" when only that is known)
    commit: str = ""  # GPU runs: the lab's git commit the reference was measured at, e.g. "46d6785"

    @classmethod
    def here(cls) -> "Provenance":
        gpu = has_cuda()
        return cls(
            device=device_name(),
            is_gpu=gpu,
            torch_version=torch.__version__,
            date=_dt.datetime.now(_dt.timezone.utc).date().isoformat(),
            host=cpu_model(),
            threads=torch.get_num_threads(),
            cuda_runtime=(torch.version.cuda or "") if gpu else "",
            driver=driver_version() if gpu else "",
            commit=lab_commit() if gpu else "",
        )

    @property
    def label(self) -> str:
        """Short label for a figure title: ``cpu (no GPU), 1 torch thread · torch 2.13.0+cpu · 2026-11-21``.

        A GPU run names its software too: ``NVIDIA H100 · torch 2.11.0 · CUDA 12.8 · driver 570.86.15 · date``.
        """
        device = self.device
        if not self.is_gpu:
            device += " (no GPU)" + (f", {self.threads} torch thread{'s' * (self.threads > 1)}" if self.threads else "")
            device += f", {self.host}" if self.host not in _ARCHITECTURES else ""  # a model, not only its family
        cuda = f" · CUDA {self.cuda_runtime}" if self.cuda_runtime else ""
        driver = f" · driver {self.driver}" if self.driver else ""
        commit = f" · lab {self.commit}" if self.commit else ""
        return f"{device} · torch {self.torch_version}{cuda}{driver} · {self.date}{commit}"

    @property
    def slug(self) -> str:
        """File-system name for the device, e.g. ``nvidia-h100-80gb-hbm3``."""
        return re.sub(r"[^a-z0-9]+", "-", self.device.lower()).strip("-")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Provenance":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


_ARCHITECTURES = ("", "x86_64", "amd64", "AMD64", "aarch64", "arm64", "i386", "i686")  # what older runs stored


def cpu_model() -> str:
    """The CPU's model (``/proc/cpuinfo``'s ``model name``, as ``AMD EPYC``), else the platform's word for it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and ":" in line:
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def driver_version() -> str:
    """The NVIDIA driver's version: ``nvidia-smi``'s answer, else what ``libcuda`` says it supports, else ""."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out.strip():
            return out.strip().splitlines()[0].strip()
    try:
        version = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0:
            return cuda_version_label(version.value)
    except (OSError, AttributeError):
        pass
    return ""


@lru_cache(maxsize=1)  # one answer per process: a run measures one checkout
def lab_commit() -> str:
    """The lab's git commit, short, with ``+`` when the working tree differs from it; "" outside a git checkout.

    ``SYNCLAB_COMMIT`` names it where the checkout travelled without its history (a copy on a GPU machine).
    """
    if os.environ.get("SYNCLAB_COMMIT"):
        return os.environ["SYNCLAB_COMMIT"]
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    if head.returncode != 0:
        return ""
    return head.stdout.strip() + ("+" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def cuda_version_label(encoded: int) -> str:
    """CUDA's integer version as people write it: ``12080`` -> ``"CUDA 12.8"``."""
    return f"CUDA {encoded // 1000}.{encoded % 1000 // 10}"
