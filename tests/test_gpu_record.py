"""The GPU suite's record (synclab/lab/gpu_record.py): what make gpu-check writes after each step, and every stored one.

A record says which commit ran the suite on which GPU, and per step its exit status, its pytest counts and the
failed tests' names. The stored ones are read here: each names a commit of this repository and holds what the
steps that ran gave. No record is ever written from a CPU run.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from synclab.lab.gpu_record import RECORD, add_step, pytest_counts
from synclab.provenance import Provenance
from synclab.reference import REFERENCE_DIR

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parents[1]
LOG = """\
tests/test_a.py::test_x PASSED
FAILED tests/test_b.py::test_y[cuda] - AssertionError: 2 != 1
FAILED tests/test_b.py::test_w[a row (its id has spaces)-cuda] - AssertionError: 0 == 2
FAILED tests/test_b.py::test_v[plain]
ERROR tests/test_c.py::test_z - RuntimeError
=========== 2 failed, 118 passed, 7 skipped, 1 error in 93.12s (0:01:33) ===========
"""


def test_a_steps_counts_and_failures_are_read_from_its_log():
    counts = pytest_counts(LOG)
    assert (counts["passed"], counts["failed"], counts["skipped"], counts["error"]) == (118, 2, 7, 1)
    assert counts["failures"] == ["tests/test_b.py::test_v[plain]",
                                  "tests/test_b.py::test_w[a row (its id has spaces)-cuda]",
                                  "tests/test_b.py::test_y[cuda]", "tests/test_c.py::test_z"]
    assert pytest_counts("=== bench: rc=0 in 12 s\n") == {}  # a step that is not pytest: its status alone


def test_the_record_keeps_each_step_of_one_commit_and_a_new_commit_starts_afresh(tmp_path):
    gpu = replace(Provenance.here(), device="NVIDIA Test GPU", is_gpu=True)
    path = add_step("cuda", 1, 61.4, LOG, root=tmp_path, here=gpu)
    add_step("bench-ch0", 0, 20, "done\n", root=tmp_path, here=gpu)
    record = json.loads(path.read_text())
    assert path == tmp_path / "nvidia-test-gpu" / RECORD and record["device"] == "NVIDIA Test GPU"
    assert set(record["steps"]) == {"cuda", "bench-ch0"} and record["steps"]["cuda"]["failed"] == 2
    assert record["passed"] is False  # a failed test fails the suite, whatever else passed
    record["commit"] = "0000000"
    path.write_text(json.dumps(record))
    add_step("smoke", 0, 3, "", root=tmp_path, here=gpu)
    assert set(json.loads(path.read_text())["steps"]) == {"smoke"}


def test_a_cpu_run_is_never_recorded(tmp_path):
    with pytest.raises(RuntimeError, match="GPU runs only"):
        add_step("cuda", 0, 1, LOG, root=tmp_path, here=replace(Provenance.here(), is_gpu=False))
    assert not list(tmp_path.rglob(RECORD))


def test_gpu_check_records_every_step():
    script = (ROOT / "tools" / "gpu-check.sh").read_text()
    assert "-m synclab.lab.gpu_record \"$name\" \"$rc\"" in script


@pytest.mark.parametrize("path", sorted(REFERENCE_DIR.glob(f"*/{RECORD}")), ids=lambda p: p.parent.name)
def test_every_stored_record_names_a_commit_of_this_lab_and_what_its_steps_gave(path):
    record = json.loads(path.read_text())
    known = subprocess.run(["git", "cat-file", "-t", record["commit"]], cwd=ROOT, capture_output=True, text=True)
    assert known.stdout.strip() == "commit", f"{path}: {record['commit']} is no commit of this repository"
    assert record["steps"] and all("rc" in step for step in record["steps"].values())
    assert record["passed"] == all(s["rc"] == 0 and not s.get("failed") and not s.get("error")
                                   for s in record["steps"].values())
