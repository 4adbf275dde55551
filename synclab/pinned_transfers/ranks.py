"""A ``torch.distributed`` group of worker processes that the lab starts, and always stops.

Taught in chapter 3 (Exercise 3.7, vLLM's data-parallel all-reduce). The checks run
the reader's ``_run_ar`` on every rank of a real process group:

* on a CPU-only machine, gloo with two processes; the device group's tensors
  are the simulated device's (``synclab.device``), so ``count_syncs`` sees what a GPU would;
* with one GPU per rank, NCCL (vLLM's device group); with fewer GPUs, gloo over CUDA tensors.

The ranks are forked from multiprocessing's fork server, a fresh process that has imported torch and
this module but never touched a GPU (a GPU cannot be shared with a child forked from a process that
used it; a spawned rank would import torch anew, seconds on a busy machine, at every start). They
rendezvous through a file store in a temporary directory: no port to find, nothing left behind.
Functions go to the ranks by value (``cloudpickle``), so a function defined in a
notebook cell runs there as it is, with the cell's helpers (an ``lru_cache``'d one too). Stopping is the point of this module:

* :meth:`RankGroup.close` asks each rank to leave (it destroys its process group),
  then terminates, then kills whatever is still there; it runs on every way out of
  the ``with`` block, including a rank's exception, a timeout and ``KeyboardInterrupt``
  (a Jupyter interrupt);
* a rank that raises or does not answer in time makes :meth:`RankGroup.run` stop
  every rank before it raises: the others may be waiting in a collective forever;
* each rank watches the process that started the group and exits the moment it ends, even while
  the rank is busy in the reader's code: a killed notebook kernel leaves no rank behind. (Linux's
  ``PR_SET_PDEATHSIG`` alone would not do: the ranks' parent is the fork server, which outlives its
  owner while any rank lives, since each forked child holds the server's lifeline.)
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import io
import multiprocessing as mp
import os
import pickle
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterator

import torch

from synclab.checks import observer
from synclab.device import has_cuda

START_TIMEOUT_S = 120.0  # the first start also starts the fork server (it imports torch): a busy machine needs a while
CALL_TIMEOUT_S = 60.0
LEAVE_GRACE_S = 5.0  # how long a rank may take to leave cleanly before it is terminated


def _cached_again(function: Callable[..., Any], maxsize: int | None, typed: bool) -> Callable[..., Any]:
    """On a rank: a reader's ``functools.lru_cache``'d helper, cached again around its function (empty)."""
    return functools.lru_cache(maxsize=maxsize, typed=typed)(function)


def _by_value(value: Any) -> bytes:
    """``value`` pickled for the ranks by ``cloudpickle``, with the reader's cached helpers sent by value too: one
    defined in a cell lives in no module a rank can import it from (``functools.cache``, ``lru_cache``)."""
    import cloudpickle

    class Pickler(cloudpickle.CloudPickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, functools._lru_cache_wrapper):
                module = sys.modules.get(getattr(obj, "__module__", "") or "")
                found = module
                for part in getattr(obj, "__qualname__", "").split("."):
                    found = getattr(found, part, None)
                if found is not obj or module is None or module.__name__ == "__main__":  # not importable
                    params = obj.cache_parameters()
                    return _cached_again, (obj.__wrapped__, params["maxsize"], params["typed"])
            return super().reducer_override(obj)

    buffer = io.BytesIO()
    Pickler(buffer, protocol=pickle.DEFAULT_PROTOCOL).dump(value)
    return buffer.getvalue()


class _PlainUnpickler(pickle.Unpickler):
    """Reads what a rank sends back: plain data (numbers, strings, lists, dicts), never an object that runs code here
    as it is rebuilt (the reader's code runs on the rank, and could send one)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def plain_loads(data: bytes) -> Any:
    """``data`` unpickled, if it holds plain data only."""
    return _PlainUnpickler(io.BytesIO(data)).load()


class RankError(RuntimeError):
    """A rank raised (its traceback is the message) or died; every rank has been stopped."""

    def __init__(self, rank: int, detail: str) -> None:
        super().__init__(f"rank {rank}: {detail}")
        self.rank = rank
        self.detail = detail


class RankTimeout(RuntimeError):
    """A rank did not answer in time (a collective that not every rank joined waits forever); all were stopped.

    ``replies``: what the ranks that did answer returned, by rank; ``missing``: the ranks that did not.
    """

    def __init__(self, message: str, replies: dict[int, Any] | None = None, missing: list[int] | None = None) -> None:
        super().__init__(message)
        self.replies = dict(replies or {})
        self.missing = list(missing or [])


def default_backend(world_size: int) -> str:
    """NCCL when every rank has a GPU of its own, else gloo (over CUDA tensors with one GPU, host tensors without)."""
    if has_cuda() and torch.cuda.device_count() >= world_size and dist_available("nccl"):
        return "nccl"
    return "gloo"


def dist_available(backend: str) -> bool:
    import torch.distributed as dist

    return dist.is_available() and (backend != "nccl" or dist.is_nccl_available())


def _die_with_parent(owner_pid: int) -> None:
    """End this rank when the process that started the group ends; at once if it already has.

    A daemon thread waits on the owner (a pidfd where Linux has them, else a poll) and exits the process:
    it runs whatever the main thread is doing. ``PR_SET_PDEATHSIG`` covers the fork server's own death.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if not _alive(owner_pid):
        os._exit(1)
    threading.Thread(target=_exit_when_gone, args=(owner_pid,), name="synclab rank: owner watch",
                     daemon=True).start()


def _exit_when_gone(owner_pid: int) -> None:
    try:
        pidfd = os.pidfd_open(owner_pid)  # readable once the process has ended
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        select.select([pidfd], [], [])
    else:
        while _alive(owner_pid):
            time.sleep(0.5)
    os._exit(1)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a killed process its parent has not reaped yet is a zombie: not alive)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _start_context() -> mp.context.BaseContext:
    """The fork server's context, its server importing torch and this module once (every later rank is a fork:
    milliseconds, not a torch import); spawn where there is no fork server."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__, "cloudpickle", "torch.distributed", "synclab.engine.dp_utils"])
    return ctx


def _rank_device(rank: int) -> Any:
    from synclab.device import SIM_DEVICE

    if not has_cuda():
        return SIM_DEVICE
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def _rank_main(rank: int, world_size: int, backend: str, init_method: str, conn: Connection, parent_pid: int,
               timeout_s: float, first: Callable[[], Callable[[], list[str]]] | None = None) -> None:
    """One rank: join the group, install the DP group, run what the parent sends until told to leave.

    ``first``: what the checks' observer asks a process they start to run before any of the reader's code (a grader's
    audit); what it then reports goes back with each reply."""
    _die_with_parent(parent_pid)
    news = first() if first is not None else None
    import cloudpickle
    import torch.distributed as dist

    from synclab.engine.dp_utils import DPGroup, set_dp_group

    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=timeout_s))
    try:
        cpu_group = dist.new_group(backend="gloo") if backend != "gloo" else dist.group.WORLD
        set_dp_group(DPGroup(rank, world_size, _rank_device(rank), dist.group.WORLD, cpu_group))
        conn.send(("ready", os.getpid()))
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the parent is gone
                break
            if message is None:
                break
            try:
                fn, args = cloudpickle.loads(message)
                reply: tuple[str, Any] = ("ok", fn(rank, *args))
            except BaseException:  # the reader's code may raise anything; report it, stay available
                reply = ("error", traceback.format_exc(limit=-6))
            seen = news() if news is not None else []  # what the observer's hook saw here since the last reply
            conn.send(("seen", (seen, reply)) if seen else reply)
    finally:
        dist.destroy_process_group()
        conn.close()


@contextlib.contextmanager
def _main_not_reimported() -> Iterator[None]:
    """A started rank re-runs the parent's ``__main__`` file (spawned or forked from the server alike); a main that is
    no file (stdin) cannot be."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or os.path.exists(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


class RankGroup:
    """``world_size`` processes in one ``torch.distributed`` group: ``with RankGroup() as ranks:``.

    ``ranks.run(fn, *args)`` calls ``fn(rank, *args)`` on every rank at once and returns
    the results in rank order. The group restarts on the next :meth:`run` after a failure.
    """

    def __init__(self, world_size: int = 2, backend: str | None = None, start_timeout_s: float = START_TIMEOUT_S,
                 call_timeout_s: float = CALL_TIMEOUT_S) -> None:
        self.world_size = world_size
        self.backend = backend or default_backend(world_size)
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self.processes: list[mp.process.BaseProcess] = []
        self._conns: list[Connection] = []
        self._dir: str | None = None
        self.starts = 0  # how many times the ranks were started

    # -- lifecycle

    def __enter__(self) -> RankGroup:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def _group_timeout_s(self) -> float:
        """The process group's own limit (rendezvous, collectives): past both of ours, so that a slow start
        still joins, and a collective left waiting is reported by :meth:`run` (naming the ranks that did
        not answer), never by the backend's timeout error from inside a rank."""
        return self.start_timeout_s + self.call_timeout_s

    @property
    def running(self) -> bool:
        return bool(self.processes)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes if p.pid is not None]

    def start(self) -> None:
        if self.running:
            return
        ctx = _start_context()
        watching = observer()
        first = watching.for_child() if watching is not None else None  # a grader's audit, armed on the ranks too
        self._dir = tempfile.mkdtemp(prefix="synclab-ranks-")
        init_method = f"file://{os.path.join(self._dir, 'store')}"
        self.starts += 1
        try:
            for rank in range(self.world_size):
                parent_end, child_end = ctx.Pipe()
                process = ctx.Process(target=_rank_main, name=f"synclab rank {rank}", daemon=True,
                                      args=(rank, self.world_size, self.backend, init_method, child_end,
                                            os.getpid(), self._group_timeout_s, first))
                with _main_not_reimported():
                    process.start()
                child_end.close()
                self.processes.append(process)
                self._conns.append(parent_end)
            self._collect("start", self.start_timeout_s)
        except BaseException:
            self.close()
            raise

    def close(self, grace_s: float = LEAVE_GRACE_S) -> None:
        """Stop every rank: ask, wait up to ``grace_s``, terminate, kill. Safe to call twice."""
        for conn in self._conns:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + grace_s
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join(2.0)
            if process.is_alive():
                process.kill()
                process.join()
        for conn in self._conns:
            conn.close()
        self.processes, self._conns = [], []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # -- work

    def run(self, fn: Callable[..., Any], *args: Any, timeout_s: float | None = None,
            straggler_s: Callable[[dict[int, Any]], float | None] | None = None) -> list[Any]:
        """``fn(rank, *args)`` on every rank; results in rank order. Stops every rank before raising.

        ``straggler_s(replies)``, asked whenever a rank answers: how many more seconds the others get,
        given what the answers so far say (None: the whole ``timeout_s``). A rank that returned without
        joining a collective leaves the others waiting in it: no need to wait out the whole limit.
        """
        self.start()
        payload = _by_value((fn, args))
        try:
            for conn in self._conns:
                conn.send(payload)
            return self._collect("call", self.call_timeout_s if timeout_s is None else timeout_s, straggler_s)
        except BaseException:
            self.close(grace_s=0.5)  # a rank that failed may have left the others waiting in a collective
            raise

    def _collect(self, what: str, timeout_s: float,
                 straggler_s: Callable[[dict[int, Any]], float | None] | None = None) -> list[Any]:
        """One reply per rank, or raise: a rank's error, a rank's death, or the deadline."""
        replies: dict[int, Any] = {}
        started = time.monotonic()
        deadline = started + timeout_s
        while len(replies) < self.world_size:
            waiting = {conn: rank for rank, conn in enumerate(self._conns) if rank not in replies}
            sentinels = {self.processes[rank].sentinel: rank for rank in waiting.values()}
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(self.world_size)) - set(replies))
                waited = time.monotonic() - started
                raise RankTimeout(f"rank(s) {missing} did not answer within {waited:.0f} s ({what}); all ranks "
                                  "were stopped. A collective that not every rank joins waits forever.",
                                  replies, missing)
            for ready in wait(list(waiting) + list(sentinels), timeout=left):
                if ready in waiting:
                    rank = waiting[ready]
                    try:
                        status, value = plain_loads(ready.recv_bytes())
                    except (EOFError, OSError):
                        raise RankError(rank, f"the process ended during {what}") from None
                    except pickle.UnpicklingError as exc:
                        raise RankError(rank, f"it sent back more than plain data ({exc})") from None
                    if status == "seen":  # the observer's lines, then the rank's own reply
                        seen, (status, value) = value
                        watching = observer()
                        if watching is not None:
                            watching.child_saw([f"{why} (on rank {rank})" for why in seen])
                    if status == "error":
                        raise RankError(rank, value)
                    replies[rank] = value
                    more = straggler_s(dict(replies)) if straggler_s is not None else None
                    if more is not None and len(replies) < self.world_size:
                        deadline = min(deadline, time.monotonic() + more)
                elif ready in sentinels and sentinels[ready] not in replies:
                    rank = sentinels[ready]
                    if not self._conns[rank].poll():  # died without a reply
                        code = self.processes[rank].exitcode
                        raise RankError(rank, f"the process exited with code {code} during {what}")
        return [replies[rank] for rank in range(self.world_size)]
