"""A model of the host and the device working in turn: when does the GPU starve?

Taught in chapter 0 (the primer); chapter 2 adds a side stream (:func:`simulate_output_loop`), chapter 3 the
staging copy of a ``non_blocking`` upload (:func:`simulate_uploads`).
This is a MODEL, not a measurement: it shows
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
    lane: str  # "host" or "device" (chapter 2: its streams; chapter 3: "copy engine")
    state: str  # "queueing work" / "waiting (sync)" on the host; "kernel" on the device; chapter 3: its copies
    start_us: float
    end_us: float
    step: int


class _Played:
    """What a played model holds: its intervals, and when the last one ends."""

    intervals: list[Interval]

    @property
    def total_us(self) -> float:
        return max(i.end_us for i in self.intervals)


@dataclass
class ModelRun(_Played):
    host_us: float
    device_us: float
    syncs: int
    launch_us: float
    steps: int
    intervals: list[Interval] = field(default_factory=list)

    @property
    def device_busy_us(self) -> float:
        return sum(i.end_us - i.start_us for i in self.intervals if i.lane == "device")

    @property
    def gpu_utilisation(self) -> float:
        """Fraction of the run the device spends computing."""
        return self.device_busy_us / self.total_us

    @property
    def step_time_us(self) -> float:
        """Time per step in the steady state (:func:`step_time_formula` gives it in closed form)."""
        return steady_step_time_us(self)

    @property
    def steady_gpu_utilisation(self) -> float:
        """Fraction of a steady-state step the device spends computing: device / step time."""
        return self.device_us / self.step_time_us


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


def step_time_formula(host_us: float, device_us: float, syncs: int, launch_us: float = 5.0) -> float:
    """The steady-state time per step that :func:`simulate` plays, in closed form (the primer prints it).

    With ``s`` syncs a step is ``s + 1`` pieces of host work ``h = host / (s + 1)`` and device work
    ``d = device / (s + 1)``. Each sync costs a piece of host work, a launch onto the idle device and the
    piece of device work, one after the other: ``s * (h + launch + d)``. The last piece's device work overlaps
    the next step's first host piece, so the step ends with ``max(h, d)``:

        T_step = s * (h + d + launch) + max(h, d)

    With no sync that is ``max(host, device)``; with many, it tends to ``host + device + s * launch``.
    """
    pieces = syncs + 1
    h, d = host_us / pieces, device_us / pieces
    return syncs * (h + d + launch_us) + max(h, d)


def steady_step_time_us(run: ModelRun, skip: int = 2) -> float:
    """The time between two steps' ends on the device, once the first ``skip`` steps (the pipeline filling) are past.

    The device's clock, not the host's: with no sync a host faster than the device runs ever further ahead.
    """
    ends = [max(i.end_us for i in run.intervals if i.lane == "device" and i.step == k) for k in range(run.steps)]
    return (ends[-1] - ends[skip]) / (run.steps - 1 - skip)


# ----------------------------------------------------------------------------- chapter 2: the output copy


@dataclass
class OutputLoopRun(_Played):
    """One runner's loop in the model of chapter 2: host, compute stream and side stream intervals."""

    host_us: float
    forward_us: float
    copy_us: float
    wait_in_step: bool  # the host drains the device at the end of each step (before #39113)
    wait_in_get_output: bool  # the host waits for the copy's event when it reads the output (#39113)
    steps: int
    intervals: list[Interval] = field(default_factory=list)

    @property
    def compute_busy_share(self) -> float:
        """Fraction of the run the compute stream spends on forwards (copies on it count as not computing)."""
        return sum(i.end_us - i.start_us for i in self.intervals if i.state == "forward") / self.total_us

    @property
    def steady_step_us(self) -> float:
        """Time per step once the loop is full: from one forward's start to the next, at the run's end.

        The run's average (``total_us / steps``) also holds the first step's fill and the last copy's
        drain; a long-running server sees this one.
        """
        starts = sorted(i.start_us for i in self.intervals if i.state == "forward")
        if len(starts) < 3:
            raise ValueError("a steady step needs at least 3 steps")
        return starts[-1] - starts[-2]

    @property
    def steady_host_wait_us(self) -> float:
        """The host's waiting in one step once the loop is full (the second to last step, past the fill)."""
        if self.steps < 3:
            raise ValueError("a steady step needs at least 3 steps")
        step = self.steps - 2
        return sum(i.end_us - i.start_us for i in self.intervals if i.lane == "host" and i.step == step
                   and i.state.startswith("waiting"))


def simulate_output_loop(host_us: float, forward_us: float, copy_us: float, *, wait_in_step: bool,
                         wait_in_get_output: bool, steps: int = 4, launch_us: float = 5.0) -> OutputLoopRun:
    """Play chapter 2's engine loop: queue step i, then read step i-1's output (``lazy_streams.step_loop``).

    Each step the host spends ``host_us`` queueing a forward of ``forward_us`` on the compute stream,
    then a device-to-host copy of its output (``copy_us``). With ``wait_in_step`` (the runner before
    #39113) the copy follows the forward on the compute stream and the host waits for both before
    it returns. Otherwise the copy goes on a side stream that waits for the forward, and
    ``wait_in_get_output`` makes the host wait for that copy only when it reads the output, a step later.
    """
    if host_us < 0 or forward_us <= 0 or copy_us < 0 or steps < 1:
        raise ValueError("need host_us >= 0, forward_us > 0, copy_us >= 0, steps >= 1")
    run = OutputLoopRun(host_us, forward_us, copy_us, wait_in_step, wait_in_get_output, steps)
    host_t = compute_t = side_t = 0.0  # when each is free
    copy_done: list[float] = []  # when each step's copy has landed
    for step in range(steps):
        queued_at = host_t + host_us
        run.intervals.append(Interval("host", "queueing work", host_t, queued_at, step))
        start = max(queued_at + launch_us, compute_t)
        compute_t = start + forward_us
        run.intervals.append(Interval("compute stream", "forward", start, compute_t, step))
        host_t = queued_at
        if wait_in_step:  # the copy on the compute stream, then the host drains the device
            run.intervals.append(Interval("compute stream", "copy", compute_t, compute_t + copy_us, step))
            compute_t += copy_us
            copy_done.append(compute_t)
            run.intervals.append(Interval("host", "waiting (end of step)", host_t, compute_t, step))
            host_t = compute_t
        else:  # the side stream waits for the forward, then copies while the next forward runs
            copy_start = max(compute_t, side_t)
            side_t = copy_start + copy_us
            run.intervals.append(Interval("side stream", "copy", copy_start, side_t, step))
            copy_done.append(side_t)
        if step > 0 and wait_in_get_output and copy_done[step - 1] > host_t:  # get_output() of step - 1
            run.intervals.append(Interval("host", "waiting (get_output)", host_t, copy_done[step - 1], step))
            host_t = copy_done[step - 1]
    if wait_in_get_output and copy_done[-1] > host_t:  # the last output, read after the loop
        run.intervals.append(Interval("host", "waiting (get_output)", host_t, copy_done[-1], steps - 1))
    return run


# ----------------------------------------------------------------------------- chapter 3: the staging copy


@dataclass
class UploadRun(ModelRun):
    """A run of :func:`simulate_uploads`: chapter 0's run with one ``non_blocking`` upload per step."""

    copy_us: float = 0.0
    staging_us: float = 0.0


def simulate_uploads(host_us: float, device_us: float, copy_us: float, staging_us: float, steps: int = 4,
                     launch_us: float = 5.0) -> UploadRun:
    """Play ``steps`` steps that each upload their input with ``.to(device, non_blocking=True)``, then run a kernel.

    Each step the host spends ``host_us`` queueing work, then calls ``.to()``. From pageable memory
    (``staging_us > 0``) the call first copies the data into a pinned staging buffer, on the host, and returns
    only when that copy is done: the host is held ``staging_us``, though it waits for nothing on the device
    (CUDA allows the call to wait for the device too; the model plays the kinder case). From pinned memory
    (``staging_us == 0``) the copy is queued and the call returns at once. The copy engine then moves the data
    (``copy_us``) once the stream reaches it, after the kernels queued before it, and the step's kernel
    (``device_us``) runs after the copy, on the same stream. No step has a sync.
    """
    if host_us < 0 or device_us <= 0 or copy_us <= 0 or staging_us < 0 or steps < 1:
        raise ValueError("need host_us >= 0, device_us > 0, copy_us > 0, staging_us >= 0, steps >= 1")
    run = UploadRun(host_us, device_us, 0, launch_us, steps, copy_us=copy_us, staging_us=staging_us)
    host_t = 0.0  # when the host is free
    device_t = 0.0  # when the stream has run everything queued on it
    for step in range(steps):
        run.intervals.append(Interval("host", "queueing work", host_t, host_t + host_us, step))
        host_t += host_us
        if staging_us:  # inside .to(): the host copies the pageable data into the pinned staging buffer
            run.intervals.append(Interval("host", "staging copy (inside .to())", host_t, host_t + staging_us, step))
            host_t += staging_us
        copy_start = max(host_t + launch_us, device_t)  # queued now; runs once the stream reaches it
        run.intervals.append(Interval("copy engine", "copy (DMA)", copy_start, copy_start + copy_us, step))
        device_t = copy_start + copy_us + device_us
        run.intervals.append(Interval("device", "kernel", copy_start + copy_us, device_t, step))
    return run
