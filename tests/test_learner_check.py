"""The learner's check (``python -m synclab check``): the lab's own check cells, run as the notebook runs them.

A terminal and a notebook must give the same verdict on the same answer, timed checks included: the same cells,
run in the command's process or in a kernel, report check for check the same outcome.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from synclab.checks import REPORT_LOG_ENV
from synclab.lab.check_server import IDLE_ENV, SERVER_ENV
from synclab.lab.learner_check import plan, read_reports, run_here
from synclab.lab.notebook_runner import run_notebook
from synclab.run_modes import CHECK_SERVER_ENV, reader_environment
from tests.honest.corpus import ROOT, answers, notebook_with

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def test_a_task_runs_its_setup_its_answers_and_its_check_and_no_profiling_cell():
    nb = nbformat.read(ROOT / "solutions" / "04_reverse_placeholder_scans.ipynb", as_version=4)
    chosen = plan(nb, ["4.2"])
    sources = [source for _, source in chosen.cells]
    assert sources[0].startswith("import math")  # the setup's imports
    assert any("class ReverseScanBatch" in s for s in sources)  # an earlier exercise's answer, as in a kernel
    assert any("def host_bottleneck_length" in s for s in sources)
    assert sources[-1].strip() == "ch4.check_bottleneck_model(host_bottleneck_length)"
    assert not any("cost_sweep" in s or "check_update_async" in s for s in sources)  # 4.1's profile and check
    assert list(chosen.checks.values()) == ["4.2"]


def test_a_walkthrough_before_the_exercises_runs_only_where_the_checks_read_what_it_binds():
    nb = nbformat.read(ROOT / "solutions" / "01_slice_then_split.ipynb", as_version=4)
    sources = [source for _, source in plan(nb, ["1.1"]).cells]
    assert not any(s.startswith("with count_syncs() as report:") for s in sources)  # the demo of the baseline's syncs
    assert sources[-1].strip() == "ch1.check_all_pool(AllPool)"


def test_a_cell_that_raises_is_named_and_the_next_one_runs():
    nb = nbformat.read(ROOT / "solutions" / "04_reverse_placeholder_scans.ipynb", as_version=4)
    answer = next(c for c in nb.cells if c.cell_type == "code" and "def host_bottleneck_length" in c.source)
    answer.source += "\nraise RuntimeError('a stray line')\n"
    run = run_here(nb, ["4.2"])
    assert any("RuntimeError: a stray line" in e for e in run.errors), run.errors
    assert run.reports["4.2"].passed  # the function was defined before the raise, as in a kernel


def test_what_the_readers_code_prints_is_kept_for_the_report_and_the_setup_cells_prints_are_not(capsys):
    """A learner debugging with print() saw nothing in a terminal's check: the answer cell's own printout, and what
    the answer printed while its check called it, are kept (the setup's banner is not), and the report shows their
    first lines."""
    from synclab.lab.cli import PRINTED_LINES, _say_printed

    nb = nbformat.read(ROOT / "solutions" / "04_reverse_placeholder_scans.ipynb", as_version=4)
    answer = next(c for c in nb.cells if c.cell_type == "code" and "def host_bottleneck_length" in c.source)
    answer.source = answer.source.replace("def host_bottleneck_length(", "def _unused(", 1) + (
        "\nprint('defined')\n"
        "def host_bottleneck_length(*args, **kwargs):\n"
        "    print('called')\n"
        "    return _unused(*args, **kwargs)\n")
    run = run_here(nb, ["4.2"])
    assert run.reports["4.2"].passed
    (in_cell, in_checks) = run.printed
    assert in_cell == ("in your Exercise 4.2 cell", "defined\n")
    assert in_checks[0] == "while Exercise 4.2's checks ran it" and set(in_checks[1].split()) == {"called"}
    calls = len(in_checks[1].split())
    _say_printed(run.printed)
    out = capsys.readouterr().out
    assert out.count("called") == min(calls, PRINTED_LINES)
    if calls > PRINTED_LINES:
        assert f"... and {calls - PRINTED_LINES} more line(s)" in out


@pytest.mark.slow
def test_the_terminal_and_the_notebook_give_the_same_verdicts_timed_checks_included(tmp_path):
    """A right 4.1, a right 5.1 and a 5.1 that keeps the tensor cache (right values, no speed-up: its timed clause
    fails) judged by the same cells in this process and in a kernel: the same outcome for every check."""
    right = answers("right")
    chosen = [next(a for a in right if a.task == "4.1"), next(a for a in right if a.task == "5.1"),
              next(a for a in answers("wrong") if a.path.stem == "5.1-tensor-cache-kept")]
    for answer in chosen:
        nb = notebook_with(answer)
        here = run_here(nb, [answer.task]).reports[answer.task]
        cells = [nbformat.v4.new_code_cell(source) for _, source in plan(nb, [answer.task]).cells]
        path, log = tmp_path / f"{answer.path.stem}.ipynb", tmp_path / f"{answer.path.stem}.jsonl"
        nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata), path)
        run_notebook(path, {REPORT_LOG_ENV: str(log)}, cell_timeout_s=120)
        kernel = read_reports(str(log))[answer.task]
        assert [(o.name, o.status) for o in here.outcomes] == [(o.name, o.status) for o in kernel.outcomes], \
            (answer.name, str(here), str(kernel))
        assert here.passed == (answer.fails == ""), (answer.name, str(here))


# ----------------------------------------------------------------------------- the warm check server


@pytest.fixture
def short_tmp():
    """A folder of this test's own with a short path (a socket's path has at most 107 bytes; pytest's are long)."""
    folder = tempfile.mkdtemp(prefix="sl-", dir="/tmp")
    yield Path(folder)
    for proc in Path("/proc").iterdir():  # the servers the test started (their socket is in the folder): stopped
        try:
            if proc.name.isdigit() and folder.encode() in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGTERM)
        except OSError:
            pass
    shutil.rmtree(folder, ignore_errors=True)


def _served_env(tmp_path) -> dict:
    """The learner's environment with the warm server on, its socket in this test's own folder, idle briefly."""
    return {**reader_environment(), SERVER_ENV: "1", IDLE_ENV: "20", "TMPDIR": str(tmp_path),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def _check(env: dict, *args: str):
    return subprocess.run([sys.executable, "-m", "synclab", "check", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def _served_once_warm(env: dict, *args: str):
    """The check run until a warm server ran it (the first run starts one as it ends; it takes a moment to listen)."""
    deadline = time.monotonic() + 60
    while True:
        run = _check(env, *args)
        if "run by the warm check server" in run.stdout or time.monotonic() > deadline:
            return run
        time.sleep(1)


def test_the_readers_choice_of_a_warm_server_reaches_the_commands_the_lab_starts(monkeypatch):
    """A reader's environment (the commands and kernels the lab and the tests start) keeps SYNCLAB_CHECK_SERVER: set
    to 0, no check they run leaves a server behind (the suite sets it so, conftest.py)."""
    assert SERVER_ENV == CHECK_SERVER_ENV  # one name: timing may not import the lab, nor the lab's client torch
    monkeypatch.setenv(SERVER_ENV, "0")
    assert reader_environment()[SERVER_ENV] == "0"


def test_a_check_run_by_the_warm_server_says_what_a_fresh_one_says(tmp_path, short_tmp):
    """The second check of a terminal is run by a Python that already imported torch and the chapters
    (synclab.lab.check_server): the same cells, the same verdict, the same exit code, in the learner's terminal."""
    env = _served_env(short_tmp)
    lab = tmp_path / "lab.ipynb"
    shutil.copy(ROOT / "labs" / "04_reverse_placeholder_scans.ipynb", lab)  # the stubs: 4.1 not written yet
    fresh = _check({**env, SERVER_ENV: "0"}, "--task", "4.1", str(lab))
    served = _served_once_warm(env, "--task", "4.1", str(lab))
    assert "run by the warm check server" in served.stdout, served.stdout + served.stderr
    assert served.returncode == fresh.returncode == 1
    said = [line for line in served.stdout.splitlines() if not line.startswith("(")]
    assert said == [line for line in fresh.stdout.splitlines() if not line.startswith("(")], (served.stdout,
                                                                                                fresh.stdout)
    right = json.loads(_check(env, "--task", "4.1", "--json", "solutions/04_reverse_placeholder_scans.ipynb").stdout)
    assert right["passed"] and [e["earned"] for e in right["exercises"]] == [e["points"] for e in right["exercises"]]


def test_stop_checks_ends_the_warm_server_at_once(short_tmp):
    """`python -m synclab stop-checks` ends the learner's warm server now, not after its idle minutes, from a
    terminal with other settings too (the same Python and code); another checkout's server is left alone, and
    `--all` reaches every server of the user's."""
    import socket
    import threading

    from synclab.lab.worker_server import receive

    env = {**_served_env(short_tmp), IDLE_ENV: "600"}
    assert "run by the warm check server" in _served_once_warm(env, "--task", "0.2", "solutions/00_primer.ipynb").stdout
    folder = Path(short_tmp) / f"synclab-check-{os.getuid()}"  # the servers' sockets (TMPDIR is the test's)
    (served,) = folder.glob("*.sock")

    def stop(environment: dict, *flags: str) -> str:
        done = subprocess.run([sys.executable, "-m", "synclab", "stop-checks", *flags], cwd=ROOT, env=environment,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    other_settings = {k: v for k, v in env.items() if k != "OMP_NUM_THREADS"}  # a fresh terminal, say
    assert other_settings != env
    assert stop(other_settings) == "stopped 1 check server"
    deadline = time.monotonic() + 20
    while served.exists():  # the server ends, and takes its name with it
        assert time.monotonic() < deadline, "the check server outlived its stop"
        time.sleep(0.1)
    # a server another checkout started: a listener of the test's own, told to stop only with --all
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "another-checkout.sock"))
    listener.listen()
    told: list[dict] = []
    thread = threading.Thread(target=lambda: told.append(receive(listener.accept()[0])[0]), daemon=True)
    thread.start()
    try:
        assert stop(env) == "no check server was running for this checkout's Python"
        assert stop(env, "--all") == "stopped 1 check server"
        thread.join(timeout=20)
    finally:
        listener.close()
    assert told == [{"stop": True}]


@pytest.mark.parametrize("served", [False, True], ids=["fresh", "served"])
def test_ctrl_c_stops_a_checks_cells_fresh_or_served(tmp_path, short_tmp, served):
    """Ctrl-C stops a check of one task where its cells run: no later cell runs (a learner's cell that never ends),
    in the command's own Python or in the warm server's child."""
    env = _served_env(short_tmp)
    if served:
        _served_once_warm(env, "--task", "4.1", "solutions/04_reverse_placeholder_scans.ipynb")
    else:
        env[SERVER_ENV] = "0"
    nb = nbformat.read(ROOT / "labs" / "04_reverse_placeholder_scans.ipynb", as_version=4)
    answer = next(c for c in nb.cells if c.cell_type == "code" and "class ReverseScanBatch" in c.source)
    pid_file = tmp_path / "check.pid"
    answer.source = (f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                     "while True:\n    time.sleep(0.1)\n")
    hung = tmp_path / "hung.ipynb"
    nbformat.write(nb, hung)
    proc = subprocess.Popen([sys.executable, "-m", "synclab", "check", "--task", "4.1", str(hung)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, "the check never ran its cells"
            time.sleep(0.2)
        child = int(pid_file.read_text())
        assert (child != proc.pid) == served  # run by the server's child, or by the command itself
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "stopped by SIGINT: no later cell ran" in err, err
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the check's process outlived its Ctrl-C")


@pytest.mark.parametrize("served", [False, True], ids=["fresh", "served"])
def test_a_check_piped_into_a_reader_that_stops_early_ends_quietly(short_tmp, served):
    """A learner's `check --json | head` ended in a BrokenPipeError traceback and "the check server ended before the
    check did" (which it had not): it now ends as a shell's pipe ends a command, quietly, with SIGPIPE's status."""
    env = _served_env(short_tmp)
    args = ["--task", "0.2", "--json", "solutions/00_primer.ipynb"]
    if served:  # warmed by a run that says who ran it (its JSON does not)
        assert "run by the warm check server" in _served_once_warm(env, "--task", "0.2", args[-1]).stdout
    else:
        env[SERVER_ENV] = "0"
    proc = subprocess.Popen([sys.executable, "-m", "synclab", "check", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader goes away before the report comes, as `head` does once it has its lines
    err = proc.stderr.read() if proc.stderr is not None else ""
    proc.wait(timeout=60)
    assert "Traceback" not in err and "ended before the check did" not in err, err
    assert proc.returncode in (0, 128 + signal.SIGPIPE), (proc.returncode, err)
