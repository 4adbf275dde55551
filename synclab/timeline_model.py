"""A model of the host and the device working in turn: when does the GPU starve?

Taught in chapter 0 (the primer). This is a MODEL, not a measurement: it shows
the mechanism with made-up costs you choose.

Each step the host spends ``host_us`` queueing work and the device spends
``device_us`` running it. The host does not wait for the device (work is
queued asynchronously) except at a synchronisation, where it waits until the
device has finished everything queued so far. A step with ``syncs`` syncs splits
its host work and device work into ``syncs + 1`` pieces, each piece ending in a
sync but the last. A kernel starts no earlier than ``launch_us`` after it was
queued (launch latency).

Without syncs the host runs ahead and the device is busy back to back whenever
``device_us >= host_us``. Every sync drains that queue: the device idles while
the host queues the next piece. Throughput is then set by ``host + device``,
not ``max(host, device)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Interval:
    lane: str  # "host" or "device"
    state: str  # "queueing work" / "waiting (sync)" on the host; "kernel" on the device
    start_us: float
    end_us: float
    step: int


@dataclass
class ModelRun:
    host_us: float
    device_us: float
    syncs: int
    launch_us: float
    steps: int
    intervals: list[Interval] = field(default_factory=list)

    @property
    def total_us(self) -> float:
        return max(i.end_us for i in self.intervals)

    @property
    def device_busy_us(self) -> float:
        return sum(i.end_us - i.start_us for i in self.intervals if i.lane == "device")

    @property
    def gpu_utilisation(self) -> float:
        """Fraction of the run the device spends computing."""
        return self.device_busy_us / self.total_us

    @property
    def step_time_us(self) -> float:
        return self.total_us / self.steps


def simulate(host_us: float, device_us: float, syncs: int, steps: int = 6, launch_us: float = 5.0) -> ModelRun:
    """Play ``steps`` decode steps through the model and return every host/device interval."""
    if host_us < 0 or device_us <= 0 or syncs < 0 or steps < 1:
        raise ValueError("need host_us >= 0, device_us > 0, syncs >= 0, steps >= 1")
    run = ModelRun(host_us, device_us, syncs, launch_us, steps)
    host_t = 0.0  # when the host is free
    device_t = 0.0  # when the device has finished everything queued
    pieces = syncs + 1
    for step in range(steps):
        for piece in range(pieces):
            queued_at = host_t + host_us / pieces
            run.intervals.append(Interval("host", "queueing work", host_t, queued_at, step))
            start = max(queued_at + launch_us, device_t)
            device_t = start + device_us / pieces
            run.intervals.append(Interval("device", "kernel", start, device_t, step))
            host_t = queued_at
            if piece < pieces - 1:  # a sync: the host waits for the device to drain its queue
                run.intervals.append(Interval("host", "waiting (sync)", host_t, device_t, step))
                host_t = device_t
    return run
