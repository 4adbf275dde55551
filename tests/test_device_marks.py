"""Every test names the device it tests (conftest.py): shown here on a CPU, where CI runs.

A test that takes a device-dependent default (``count_syncs()``, ``pick_device()``) would pass on a CPU and fail
on a GPU, or the other way round. An unmarked test fails on every machine, so such a test cannot be committed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from synclab.device import DEVICE_ENV, has_cuda, pick_device

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parents[1]

SAMPLE = '''
import pytest
import torch

from synclab.device import has_cuda, pick_device
from synclab.syncs import count_syncs


def test_unmarked_takes_the_default():
    with count_syncs() as report:
        pass
    assert report.count == 0


@pytest.mark.sim
def test_marked_sim_sees_no_gpu():
    assert not has_cuda() and str(pick_device()) == "cpu"
    with count_syncs() as report:
        pass
    assert report.simulated


@pytest.mark.cuda
def test_marked_cuda_sees_the_gpu():
    assert has_cuda() and pick_device().type == "cuda"
'''


def run_sample(tmp_path: Path) -> subprocess.CompletedProcess:
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k not in (DEVICE_ENV, "SYNCLAB_DEVICE_ASKED")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist",
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_an_unmarked_test_fails_a_sim_test_passes_a_cuda_test_needs_a_gpu(tmp_path):
    result = run_sample(tmp_path)
    out = result.stdout
    assert "ERROR test_sample.py::test_unmarked_takes_the_default" in out, out
    assert "names no device: mark it @pytest.mark.sim" in out, out
    assert "PASSED test_sample.py::test_marked_sim_sees_no_gpu" in out, out
    if torch.cuda.is_available():  # the real answer, which SYNCLAB_DEVICE=sim hides from the lab only
        assert "PASSED test_sample.py::test_marked_cuda_sees_the_gpu" in out, out
    else:
        assert "needs a CUDA GPU" in out, out
    assert result.returncode == 1


def test_inside_a_sim_test_the_lab_sees_no_gpu():
    assert os.environ[DEVICE_ENV] == "sim"
    assert has_cuda() is False and str(pick_device()) == "cpu"
