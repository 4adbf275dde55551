"""The grader's worker kept warm: one Python that has imported the chapters forks each grading job's worker.

Used by :func:`synclab.lab.judge.run_worker` when no sandbox command is set (a sandbox's worker runs as another
user, so it is started afresh under that command, as before). Starting the worker costs a fresh Python importing
torch and a chapter, about 2 s of CPU, once per :func:`~synclab.lab.judge.judge_notebook` call; a grading
process that judges many notebooks (``grade`` on a class, the tests) paid it each time.

The server (:func:`serve`, run by ``python -m synclab.lab.judge_worker --serve``) is such a Python: it imports
the packages a job names and runs their grader warm-ups, and nothing else; it never runs a cell. For each job it
forks a child that takes the job's environment, folder, channel and stderr, starts a session of its own and runs the
job as a fresh worker would (:func:`synclab.lab.judge_worker.run_job`: each exercise in a process forked for it
alone). So a job's processes descend from a process that ran no reader's code, as before, and the judge kills a
job's whole session at its end, as before. The server's environment is the job's, less what a job may set for
itself (the seed: ``per_job``); a job with another environment gets a server of its own.

This module imports only the standard library: the server's copy of it, like the chapters it imports, comes from
the grading install.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Callable

_HEADER = struct.Struct("!Q")  # the length of the JSON that follows


def send(sock: socket.socket, message: dict, fds: tuple[int, ...] = ()) -> None:
    """``message`` as JSON behind its length, with ``fds`` (descriptors the other process receives as its own)."""
    payload = json.dumps(message).encode()
    header = _HEADER.pack(len(payload))
    if fds:
        socket.send_fds(sock, [header], list(fds))
    else:
        sock.sendall(header)
    sock.sendall(payload)


def receive(sock: socket.socket) -> tuple[dict, list[int]]:
    """The next message and the descriptors that came with it; EOFError when the other end closed."""
    data, fds, _, _ = socket.recv_fds(sock, _HEADER.size, 4)
    while len(data) < _HEADER.size:
        more = sock.recv(_HEADER.size - len(data))
        if not more:
            raise EOFError
        data += more
    (size,) = _HEADER.unpack(data)
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return json.loads(b"".join(chunks)), fds


# ----------------------------------------------------------------------------- the server's side


def serve(fd: int, prepare: Callable[[dict], None], run_job: Callable[[dict], int]) -> int:
    """Serve jobs on the socket ``fd`` until the judge closes it: ``prepare`` a job here (imports, warm-ups), then run
    it in a forked child (``run_job``), whose pid goes back to the judge."""
    sock = socket.socket(fileno=fd)
    while True:
        reap_children()
        try:
            request, fds = receive(sock)
        except (EOFError, ConnectionError):
            return 0
        channel, stderr, *answers = fds  # answers: the job's connection to the answers' server, if it has one
        job, env, cwd = request["job"], request["env"], request["cwd"]
        prepare(job)
        pid = os.fork()
        if pid == 0:  # the job's worker: a session of its own, the job's stderr, folder and environment
            try:
                sock.close()
                enter_session(stderr, cwd, env)
                job["channel_fd"] = channel
                job["answer_server_fd"] = answers[0] if answers else None
                code = run_job(job)
            except BaseException as exc:  # noqa: BLE001 - said on the job's stderr; the judge reports the rest
                print(f"the grader's worker failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                code = 1
            os._exit(code)
        for fd in fds:
            os.close(fd)
        send(sock, {"pid": pid})


def enter_session(stderr: int, cwd: str, env: dict[str, str]) -> None:
    """In a child just forked for a job: a session of its own (the judge kills it whole), the job's stderr, folder and
    environment."""
    os.setsid()
    os.dup2(stderr, 2)
    os.close(stderr)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)


def reap_children() -> set[int]:
    """Collect the children that ended (a job whose session the judge killed, a check that ran); their pids."""
    ended: set[int] = set()
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.add(pid)


# ----------------------------------------------------------------------------- the judge's side


class WorkerServer:
    """A server started by this process, for jobs with one environment (less what each job sets for itself)."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self._owner = os.getpid()  # a process forked from this one must not end the server (close)
        ours, theirs = socket.socketpair()
        self._folder = tempfile.TemporaryDirectory(prefix="synclab-judge-server-")
        os.chmod(self._folder.name, 0o755)
        self._proc = subprocess.Popen([*command, str(theirs.fileno())], pass_fds=(theirs.fileno(),), env=env,
                                      cwd=self._folder.name, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        self._sock = ours
        self._lock = threading.Lock()  # one job handed over at a time (a job then runs on its own)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def start_job(self, job: dict, env: dict[str, str], cwd: str, channel: int, stderr: int,
                  answers: int | None = None) -> int:
        """Hand ``job`` over with the write ends of its channel and stderr (and its connection to the answers'
        server, ``answers``); the pid of its worker (a session leader: the judge kills its group at the end).
        OSError when the server is gone."""
        fds = (channel, stderr) if answers is None else (channel, stderr, answers)
        return int(self.hand_over({"job": job, "env": env, "cwd": cwd}, fds)["pid"])

    def hand_over(self, message: dict, fds: tuple[int, ...]) -> dict:
        """Send ``message`` with ``fds``; the server's reply. OSError when the server is gone."""
        with self._lock:
            send(self._sock, message, fds)
            try:
                reply, _ = receive(self._sock)
            except EOFError:
                raise BrokenPipeError("the grader's server ended") from None
        return reply

    def close(self) -> None:
        self._sock.close()
        if os.getpid() != self._owner:
            return
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._folder.cleanup()


_SERVERS: dict[str, WorkerServer] = {}
_SERVERS_LOCK = threading.Lock()
MAX_SERVERS = 4  # servers kept warm at once: a worker and an answers' server per environment (a test that changes
#                 the environment starts others)


def server_for(command: list[str], env: dict[str, str], per_job: tuple[str, ...] = ()) -> WorkerServer:
    """This process's server for ``env`` less ``per_job`` (variables each job sets for itself, which the server
    imports nothing to read): started on first use, and again where it died."""
    shared = {k: v for k, v in env.items() if k not in per_job}
    key = json.dumps([command, sorted(shared.items())])
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is not None and not server.alive():
            _SERVERS.pop(key).close()
            server = None
        if server is None:
            while len(_SERVERS) >= MAX_SERVERS:
                _SERVERS.pop(next(iter(_SERVERS))).close()
            server = _SERVERS[key] = WorkerServer(command, shared)
        return server


def close_all() -> None:
    """End this process's servers (at exit; their jobs' sessions are the judge's to kill, and were)."""
    with _SERVERS_LOCK:
        while _SERVERS:
            _SERVERS.popitem()[1].close()


atexit.register(close_all)
