"""The notebook runner behind `python -m synclab check`: limits that hold, signals that stop it, no kernel left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from synclab.lab.notebook_runner import run_notebook
from synclab.run_modes import reader_environment

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parent.parent


def notebook(tmp_path: Path, *sources: str) -> Path:
    path = tmp_path / "lab.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell(s) for s in sources]), path)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_endless_cell_is_interrupted_and_the_next_cells_run(tmp_path):
    path = notebook(tmp_path, "while True:\n    pass", "import time\ntime.sleep(600)", "done = 1\ndone")
    run = run_notebook(path, cell_timeout_s=2)
    assert sorted(run.timed_out) == [0, 1]
    assert run.errors[:2] == ["cell 0: timed out: ran longer than 2 s and was interrupted",
                              "cell 1: timed out: ran longer than 2 s and was interrupted"]
    assert run.notebook.cells[2].outputs[0]["data"]["text/plain"] == "1"  # the kernel survived the interrupts


def test_the_notebook_limit_leaves_the_remaining_cells_unrun(tmp_path):
    path = notebook(tmp_path, "import time\ntime.sleep(600)", "x = 1", "y = 2")
    # 6 s: a kernel may take seconds to start on a loaded machine; the limit must still land in cell 0
    run = run_notebook(path, cell_timeout_s=60, notebook_timeout_s=6)
    assert list(run.timed_out) == [0] and run.not_run == [1, 2]
    assert run.errors[-1] == "cells 1, 2: not run: the notebook's 6 s limit was reached"


def test_only_the_cells_asked_for_run(tmp_path):
    path = notebook(tmp_path, "a = 1", "raise RuntimeError('not me')", "a + 1")
    run = run_notebook(path, cells={0, 2})
    assert run.errors == [] and run.notebook.cells[2].outputs[0]["data"]["text/plain"] == "2"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_check_and_its_kernel(tmp_path, signum):
    pid_file = tmp_path / "kernel.pid"
    path = notebook(tmp_path, f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                              "while True:\n    time.sleep(0.1)")
    env = reader_environment()
    proc = subprocess.Popen([sys.executable, "-m", "synclab", "check", str(path)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, "the kernel never started"
            time.sleep(0.2)
        kernel_pid = int(pid_file.read_text())
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)  # promptly, or this raises
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum
    assert f"stopped by {signal.Signals(signum).name}: the kernel was shut down" in err
    deadline = time.monotonic() + 10
    while _alive(kernel_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(kernel_pid), "the kernel outlived the check"
