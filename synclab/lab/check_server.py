"""The learner's check kept warm: ``python -m synclab check --task`` served by a Python that has torch imported.

Used by :func:`synclab.lab.cli.cmd_check`. A check from a terminal is a fresh Python, and most of its time went to
importing torch and the chapters (2-3 s, against a few tenths for the checks of one task). So the first such check
starts, as it ends, a server that imports them and waits for the next ones (:func:`serve`); each later check
hands the server its command line, folder, environment and terminal (its standard streams), and the server forks
a child that runs the command there as this process would have (:func:`synclab.lab.cli.main`, which
``python -m synclab serve-checks`` hands it): the same cells, the same checks, the same verdict, in the learner's
terminal. Ctrl-C reaches the child.

* The server runs nothing of the learner's: it imports, then only forks. It ends after :data:`IDLE_S` without a
  check, or at once with ``python -m synclab stop-checks`` (:func:`stop_servers`).
* One server per user, Python, version of the package's code and environment (a socket in a 0700 folder of this
  user's, named by a digest of the first three, then one of the environment): an edited package, another venv or
  another setting starts another, and ``stop-checks`` ends every server of this Python and code, whatever the
  settings it was started with (a terminal without ``OMP_NUM_THREADS`` still finds the one started with it).
  The server runs in the checkout's folder, so a tool that looks for a checkout's processes by folder finds it.
* Off where ``SYNCLAB_CHECK_SERVER=0``, and on a machine with an NVIDIA device (a forked child may not start CUDA
  after its parent did; the server would not, but the lab does not bet a GPU run on it). The test suite sets it off
  except where it tests the server (conftest.py).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable

from synclab import package_digest, private_folder
from synclab.lab.worker_server import reap_children, receive, send

SERVER_ENV = "SYNCLAB_CHECK_SERVER"  # "0": every check in a fresh Python of its own
IDLE_ENV = "SYNCLAB_CHECK_SERVER_IDLE_S"  # how long a server waits for the next check (the tests shorten it)
IDLE_S = 900.0
_VOLATILE = ("PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES")  # a shell's, not a setting
_SOCKET_PATH_MAX = 104  # a Unix socket's path is at most 107 bytes on Linux (104 on macOS)
_CHECKOUT = Path(__file__).resolve().parents[2]  # where the server runs: this checkout's folder
SERVED = False  # True in a check the server runs: that one runs here, never asks a server again


def enabled() -> bool:
    return os.environ.get(SERVER_ENV, "1") != "0" and not Path("/dev/nvidiactl").exists()


def socket_path(env: dict[str, str]) -> Path | None:
    """Where the server for this Python, this code and ``env`` listens (None: no folder of ours to put it in)."""
    folder = private_folder("synclab-check")
    if folder is None:
        return None
    settings = json.dumps(sorted((k, v) for k, v in env.items() if k not in _VOLATILE))
    path = folder / f"{_this_code()}-{hashlib.sha256(settings.encode()).hexdigest()[:12]}.sock"
    return path if len(str(path)) < _SOCKET_PATH_MAX else None  # a long TMPDIR: every check in a fresh Python


def _this_code() -> str:
    """The first part of a server's name: this Python and the package's code (an edit starts a new server)."""
    digest = hashlib.sha256()
    for part in (sys.executable, sys.version, package_digest()):
        digest.update(part.encode())
    return digest.hexdigest()[:12]


# ----------------------------------------------------------------------------- the check's side


def run_served(argv: list[str]) -> int | None:
    """Run ``python -m synclab <argv>`` in the warm server: its exit code. None where there is no server to ask
    yet (one is then started, as this process ends, for the next check; this one runs here)."""
    env = dict(os.environ)
    path = socket_path(env)
    if path is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        atexit.register(_start_server, path, env)  # once this check is done: it does not share the cores with it
        return None
    with sock:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            send(sock, {"argv": argv, "cwd": os.getcwd(), "env": env}, (0, 1, 2))
        except OSError:
            return None
        child, stopped_by = 0, 0

        def forward(signum: int, frame: object) -> None:  # Ctrl-C or a kill: the child's, as it would have been ours
            nonlocal stopped_by
            stopped_by = signum
            if child:
                os.kill(child, signum)

        previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            while True:
                try:
                    message, _ = receive(sock)
                except (EOFError, OSError):
                    if stopped_by:
                        return 128 + stopped_by
                    print("the check server ended before the check did; run it again (SYNCLAB_CHECK_SERVER=0 runs "
                          "every check in a fresh Python)", file=sys.stderr)
                    return 1
                if "pid" in message:
                    child = int(message["pid"])
                    if stopped_by:  # a signal that came before the pid
                        os.kill(child, stopped_by)
                if "exit" in message:
                    return int(message["exit"])
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def stop_servers(every: bool = False) -> int:
    """Ask the check servers of this Python and package to end now, whatever settings started them (``python -m
    synclab stop-checks``; ``every``: each of this user's, whatever checkout started it): how many there were."""
    folder = private_folder("synclab-check")
    stopped = 0
    paths = sorted(folder.glob("*.sock" if every else f"{_this_code()}-*.sock")) if folder is not None else []
    for path in paths:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            send(sock, {"stop": True})
            stopped += 1
        except OSError:  # a server that already ended left its name behind
            path.unlink(missing_ok=True)
        finally:
            sock.close()
    return stopped


def _start_server(path: Path, env: dict[str, str]) -> None:
    sys.stdout.flush()  # the check's own lines first; then this one after a newline, on a line of its own however a
    # reader joins the two streams (learners who glued stdout to stderr read "...DID NOT PASS(a warm ...")
    print(f"\n(a warm check server starts for the next checks: it ends after {IDLE_S / 60:.0f} idle minutes, or now "
          "with `python -m synclab stop-checks`)", file=sys.stderr, flush=True)
    subprocess.Popen([sys.executable, "-m", "synclab", "serve-checks", str(path)], env=env, cwd=_CHECKOUT,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)


# ----------------------------------------------------------------------------- the server's side


def serve(path: Path, run: Callable[[list[str]], int], preload: list[str], idle_s: float | None = None) -> int:
    """Import ``preload`` (what a check needs), then fork a child per check, which runs ``run(argv)`` (the command
    line's ``main``), until ``idle_s`` (:data:`IDLE_ENV`, :data:`IDLE_S`) pass without one."""
    if idle_s is None:
        idle_s = float(os.environ.get(IDLE_ENV, IDLE_S))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path.unlink(missing_ok=True)
        listener.bind(str(path))
    except OSError:
        return 0  # another server took the name first
    listener.listen()
    import importlib

    for module in preload:  # imports only: no cell runs here
        importlib.import_module(module)
    import nbformat.validator  # every check reads a notebook: the schema's validator compiled once, here

    nbformat.validator.get_validator()
    listener.settimeout(idle_s)
    signal.signal(signal.SIGCHLD, lambda signum, frame: reap_children())  # a check that ended leaves no zombie
    while True:
        try:
            connection, _ = listener.accept()
        except socket.timeout:
            break
        try:
            request, fds = receive(connection)
        except (EOFError, OSError):
            connection.close()
            continue
        if request.get("stop"):  # python -m synclab stop-checks
            connection.close()
            break
        go_read, go_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            listener.close()
            os.close(go_write)
            os.read(go_read, 1)  # the check's side has the pid first: its Ctrl-C can reach this child
            os.close(go_read)
            _run_check(connection, request, fds, run)
        os.close(go_read)
        for fd in fds:
            os.close(fd)
        try:
            send(connection, {"pid": pid})
        except OSError:
            pass
        os.write(go_write, b"x")
        os.close(go_write)
        connection.close()
    listener.close()
    if path.exists():
        path.unlink()
    return 0


def _run_check(connection: socket.socket, request: dict, fds: list[int], run: Callable[[list[str]], int]) -> None:
    """In the forked child: the check's terminal, folder, environment and command line, then its exit code."""
    global SERVED
    SERVED, code = True, 1
    try:
        for target, fd in enumerate(fds):  # the check's standard streams become ours
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[SERVER_ENV] = "0"  # this check, and anything it starts, runs here: it never asks a server
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the check's own children are its own to wait for
        sys.argv = ["python -m synclab", *request["argv"]]
        code = run(request["argv"])
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # its reader went away (`check --json | head`): as a shell's pipe ends a command
        code = 128 + signal.SIGPIPE
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # noqa: BLE001 - said in the check's terminal, as a fresh Python would say it
        import traceback

        traceback.print_exception(exc)
        code = 1
    finally:
        try:
            flush_what_is_read()
            send(connection, {"exit": code})
        finally:
            os._exit(0)


def flush_what_is_read() -> None:
    """Flush the standard streams; one whose reader went away (``check --json | head``) is let go: pointed at
    /dev/null, so that nothing later tries to write to it (``python -m synclab`` ends the same way)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
