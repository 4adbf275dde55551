"""Which platform the runner is on: vLLM's ``current_platform.is_cuda_alike()``.

Taught in chapter 2 (lazy streams). CUDA and ROCm have streams and events, so
the runner can copy its outputs on a side stream; CPU and XPU runners cannot.
Checks force the answer (:func:`forced_platform`) to test the CPU path on a GPU
machine too, and :mod:`synclab.sim.cuda` makes a CPU machine CUDA-like
for the duration of a simulation.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from synclab.device import has_cuda, runs_on_device_process
from synclab.sim import cuda as sim_cuda


class Platform:
    def __init__(self) -> None:
        self._forced: list[bool] = []

    def is_cuda_alike(self) -> bool:
        if self._forced:
            return self._forced[-1]
        return has_cuda() or sim_cuda.is_simulating() or runs_on_device_process()


current_platform = Platform()


@contextmanager
def forced_platform(cuda_alike: bool) -> Iterator[Platform]:
    """Make ``current_platform.is_cuda_alike()`` answer ``cuda_alike`` inside the block."""
    current_platform._forced.append(cuda_alike)
    try:
        yield current_platform
    finally:
        current_platform._forced.pop()
