"""Run a notebook in a fresh kernel, within time limits that hold, and always stop the kernel.

Used by ``python -m synclab check`` (a reader's lab), ``measure`` and ``bench``
(the solutions). What a reader's code can do to a run, and what happens:

* a cell runs longer than its limit (an endless loop, a ``time.sleep``): the
  kernel is interrupted, the cell is reported as timed out, the next cell runs;
* the whole notebook runs past its limit: the cells left are reported as not run;
* the kernel ignores the interrupt (stuck in C code): it is shut down once the
  notebook's limit and a grace period have passed;
* the command itself gets SIGINT or SIGTERM: the kernel is shut down and
  :class:`Stopped` is raised, for the caller to exit non-zero.

A check's own limits (per check, per exercise) are in :mod:`synclab.checks`.
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from synclab.run_modes import NBVAL_ENV

GRACE_S = 10.0
_QUIET = logging.getLogger("synclab.lab.notebook_runner.nbclient")  # nbclient's log: the run's report says it better
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False  # after an interrupt, how long a kernel may take before it is shut down


class Stopped(Exception):
    """The run was stopped by a signal (``signum``); the kernel, where one ran it, has been shut down."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


@dataclass
class NotebookRun:
    """A notebook after a run: its outputs, and what went wrong, cell by cell."""

    notebook: Any  # nbformat.NotebookNode, with the outputs of the cells that ran
    errors: list[str] = field(default_factory=list)  # "cell N: Name: message", in cell order
    timed_out: dict[int, int] = field(default_factory=dict)  # cell -> the limit (s) it was interrupted at
    not_run: list[int] = field(default_factory=list)  # cells skipped: the notebook's limit was reached
    seconds: float = 0.0


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM (and SIGINT) into :class:`Stopped` in the main thread, so ``finally`` blocks run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_stopped(signum: int, frame: Any) -> None:
        # nbclient's pending tasks die with the kernel; asyncio would print their tracebacks after ours
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        raise Stopped(signum)

    previous = {s: signal.signal(s, raise_stopped) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits the environment
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def _kill(km: Any) -> None:
    """Kill the kernel's process outright (from another thread): nbclient then reports a dead kernel."""
    process = getattr(getattr(km, "provisioner", None), "process", None)
    if process is not None and process.poll() is None:
        process.kill()


def run_notebook(path: Path, env: dict[str, str] | None = None, *, cell_timeout_s: float = 600,
                 notebook_timeout_s: float | None = None, cells: set[int] | None = None,
                 on_cell: Callable[[int, Any, float | None], None] | None = None) -> NotebookRun:
    """Run ``path``'s code cells (only those in ``cells``, if given) in a fresh kernel, in the notebook's folder.

    ``on_cell(index, cell, None)`` is called as a cell starts and ``on_cell(index, cell, seconds)`` once it ran: a
    long run (``bench`` on a GPU) can say where it is, in a log that outlives a kill.
    """
    import nbformat
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    nb = nbformat.read(path, as_version=4)
    run = NotebookRun(nb)
    started = time.monotonic()
    # the kernel reports every check, never raises for one (a run under pytest --nbval would make it: run_modes)
    with _environment({NBVAL_ENV: "", **(env or {})}), tempfile.TemporaryDirectory() as sockets:
        # IPC sockets, not TCP ports: two kernels started at once (pytest -n 2) cannot race
        # for the same free port and end up talking to each other's client.
        # The asynchronous manager: with the blocking one, nbclient's cell timeout never fires.
        km = AsyncKernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel"))
        client = NotebookClient(nb, km=km, timeout=int(cell_timeout_s), allow_errors=True, record_timing=False,
                                interrupt_on_timeout=True, resources={"metadata": {"path": str(path.parent)}},
                                log=_QUIET)
        watchdog = None
        if notebook_timeout_s is not None:  # a kernel deaf to interrupts is shut down, which ends the run
            watchdog = threading.Timer(notebook_timeout_s + GRACE_S, _kill, args=(km,))
            watchdog.daemon = True
            watchdog.start()
        try:
            with client.setup_kernel():
                for index, cell in enumerate(nb.cells):
                    if cell.cell_type != "code" or (cells is not None and index not in cells):
                        continue
                    limit = cell_timeout_s
                    if notebook_timeout_s is not None:
                        limit = min(limit, notebook_timeout_s - (time.monotonic() - started))
                        if limit < 1:
                            run.not_run.append(index)
                            continue
                    client.timeout = max(1, int(limit))
                    begun = time.monotonic()
                    if on_cell is not None:
                        on_cell(index, cell, None)
                    client.execute_cell(cell, index)
                    if on_cell is not None:
                        on_cell(index, cell, time.monotonic() - begun)
                    if time.monotonic() - begun >= client.timeout:
                        run.timed_out[index] = client.timeout
        except DeadKernelError:
            run.errors.append(f"the kernel did not answer an interrupt within {GRACE_S:g} s and was shut down")
        finally:
            if watchdog is not None:
                watchdog.cancel()
            if client.kc is not None:
                client.kc.stop_channels()
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=True)
    for i, cell in enumerate(nb.cells):
        if i in run.timed_out:
            run.errors.append(f"cell {i}: timed out: ran longer than {run.timed_out[i]} s and was interrupted")
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                run.errors.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
    if run.not_run:
        run.errors.append(f"cells {', '.join(map(str, run.not_run))}: not run: the notebook's "
                          f"{notebook_timeout_s:g} s limit was reached")
    run.seconds = time.monotonic() - started
    return run
