"""The answers' processes kept warm: one Python on the students' install forks each answer's process.

Used by :func:`synclab.lab.judge.run_worker` for a job with exercises judged apart, when no sandbox command is set
(a sandboxed worker starts each answer's process afresh, as its user). Started afresh, an answer's process
(:mod:`synclab.lab.answer_process`) is a Python importing torch and a chapter, about 2.5 s of CPU for each exercise
judged apart; a grading process that judges many notebooks (``grade`` on a class, the tests) paid it each time.

The server (``python -m synclab.lab.answer_server FD``) runs with the answers' environment (the install without the
answers judged apart, no seed of the grader's). It imports the chapters a request names, and nothing else: it never
runs a cell. The judge hands it one connection per grading job (:func:`connect`); on it, the job's checks ask for an
answer's process (``start``, with the pipes it talks on and its stderr), which the server forks, in a session of its
own, and stop it (``kill``). A connection that closes (its job ended, or the judge killed the job) takes every
process started for it with it. An answer's process so descends from a process that ran no reader's code, holds the
pipes of its one exercise and nothing of the server's, and answers as a fresh one would.

This module imports only the standard library and :mod:`.worker_server`'s framing and session setup: the server's
copy of it comes from the answers' install.
"""

from __future__ import annotations

import importlib
import os
import select
import signal
import socket
import sys

from synclab.lab.worker_server import enter_session, receive, reap_children, send


def serve(control_fd: int) -> int:
    """Serve the judge's connections until it closes ``control_fd``, then stop every answer's process still running."""
    control = socket.socket(fileno=control_fd)
    started: dict[socket.socket, set[int]] = {}  # each connection -> the answers' processes started for it
    while True:
        ready, _, _ = select.select([control, *started], [], [])
        ended = reap_children()
        for pids in started.values():
            pids -= ended
        for sock in ready:
            try:
                request, fds = receive(sock)
            except (EOFError, ConnectionError):
                if sock is control:
                    for pids in started.values():
                        _stop_all(pids)
                    return 0
                _stop_all(started.pop(sock))
                sock.close()
                continue
            if sock is control:  # a job's connection, handed over by the judge
                started[socket.socket(fileno=fds[0])] = set()
                send(control, {"connected": True})
            elif "start" in request:
                pid = _fork_answer(request["start"], fds, [control, *started])
                started[sock].add(pid)
                send(sock, {"pid": pid})
            elif "kill" in request:
                pid = int(request["kill"])
                if pid in started[sock]:  # only its own, and only while not yet collected
                    started[sock].discard(pid)
                    _stop_all({pid})
                send(sock, {"killed": pid})


def _fork_answer(start: dict, fds: list[int], sockets: list[socket.socket]) -> int:
    """Fork one answer's process: its pipes (``fds``: requests, replies, stderr), folder and environment."""
    for module in start.get("imports", []):
        if module.split(".")[0] == "synclab":  # what the answer's setup cells import first, imported once here
            importlib.import_module(module)
    requests, replies, stderr = fds
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for sock in sockets:  # the server's connections are not the answer's to use
                sock.close()
            enter_session(stderr, start["cwd"], start["env"])
            from synclab.lab.answer_process import serve as answer

            with os.fdopen(requests, "r") as into, os.fdopen(replies, "w") as out:
                answer(into, out)
            code = 0
        except BaseException as exc:  # noqa: BLE001 - said on its stderr, which the grader reads as its last words
            print(f"the answer's process failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(code)
    for fd in fds:
        os.close(fd)
    return pid


def _stop_all(pids: set[int]) -> None:
    """Kill each process's session (the answer's own, and whatever it started) and collect it."""
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # not yet a session leader: the process alone
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


# ----------------------------------------------------------------------------- the grader's side


class Connection:
    """A job's connection to the answers' server, as the job's checks use it: start an answer's process, kill it."""

    def __init__(self, fd: int) -> None:
        self._sock = socket.socket(fileno=os.dup(fd))

    def start(self, env: dict[str, str], cwd: str, imports: list[str], fds: tuple[int, int, int]) -> int:
        """Fork an answer's process on the pipes ``fds`` (requests, replies, stderr); its pid."""
        send(self._sock, {"start": {"env": env, "cwd": cwd, "imports": imports}}, fds)
        reply, _ = receive(self._sock)
        return int(reply["pid"])

    def kill(self, pid: int) -> None:
        try:
            send(self._sock, {"kill": pid})
            receive(self._sock)
        except (OSError, EOFError):  # the server is gone, and its processes with it
            pass

    def close(self) -> None:
        self._sock.close()


def connect(env: dict[str, str]) -> socket.socket:
    """A new connection to this process's answers' server for ``env`` (started on first use): hand it to one job."""
    from synclab.lab.worker_server import server_for

    server = server_for([sys.executable, "-m", "synclab.lab.answer_server"], env)
    ours, theirs = socket.socketpair()
    try:
        server.hand_over({"connect": True}, (theirs.fileno(),))
    finally:
        theirs.close()
    return ours


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
