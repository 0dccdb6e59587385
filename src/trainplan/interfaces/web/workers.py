"""Work that can be stopped at its budget: worker processes for config reading and plan searches.

A thread cannot be stopped, so a request that runs past its budget in one keeps its core (and the
interpreter lock) after its 504. Here each such request runs in a worker process instead: the
request waits for the worker's answer on a pipe, and past the budget the worker is killed, which
frees all it held; the next request gets a fresh one. A worker whose memory has grown past
RECYCLE_RSS_BYTES after a job exits and is replaced the same way, so the server's memory comes
back down after large searches.

Workers are forked from a clean server process that has imported the engine once
(`forkserver`), not from the web server itself with its threads and sockets. Jobs are
module-level functions of `trainplan.interfaces.web.jobs`, and what comes back is bytes (`answers.Answer`).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from trainplan.interfaces.web.answers import Answer

PRELOAD = "trainplan.interfaces.web.jobs"
RECYCLE_RSS_BYTES = 400 * 1024 * 1024  # a worker past this after a job is replaced
START_TIMEOUT_S = 60.0


class WorkerStopped(Exception):
    """The worker went away before answering (killed past the budget, or it crashed)."""


def _rss_bytes() -> int:
    """This process's resident memory (Linux /proc; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _work(connection: Connection, recycle_bytes: int) -> None:
    """A worker's loop: run each job it is sent, send its answer back; exit when the server
    closes the pipe, or after a job that left it past `recycle_bytes` of resident memory."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    from trainplan.interfaces.web.jobs import run_job

    while True:
        try:
            function, args = connection.recv()
        except (EOFError, OSError):
            return
        answer = run_job(function, args)
        retire = _rss_bytes() > recycle_bytes
        connection.send((answer, retire))
        if retire:
            connection.close()
            return


def _context() -> Any:
    """The forkserver context (the engine imported once, in a process without threads), or
    spawn where there is none."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([PRELOAD])
        return context
    return multiprocessing.get_context("spawn")


class Worker:
    """One worker process and the server's end of its pipe."""

    def __init__(self, recycle_bytes: int = RECYCLE_RSS_BYTES) -> None:
        context = _context()
        ours, theirs = context.Pipe(duplex=True)
        self.process: BaseProcess = context.Process(target=_work, args=(theirs, recycle_bytes), daemon=True)
        self.process.start()
        theirs.close()
        self.connection: Connection = ours
        self.retired = False

    def call(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Answer:
        """Send one job and wait for its answer (in a thread: this blocks). A worker that says it
        retires (its memory grew) is done after this answer."""
        try:
            self.connection.send((function, args))
            answer, retire = self.connection.recv()
        except (EOFError, OSError):
            raise WorkerStopped from None
        self.retired = bool(retire)
        return (int(answer[0]), bytes(answer[1]))

    def alive(self) -> bool:
        """Whether the process runs and its pipe is open."""
        return not self.retired and not self.connection.closed and self.process.is_alive()

    def kill(self) -> None:
        """Stop the process at once and reap it."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.connection.close()


def _kill_all(workers: set[Worker]) -> None:
    for worker in list(workers):
        worker.kill()
    workers.clear()


class Workers:
    """At most `size` worker processes, started when first needed and reused. `run` gives a job
    to an idle one (waiting for one when all are busy) and answers within `budget_s` or raises
    TimeoutError, the worker then killed; WorkerStopped when it died before answering."""

    def __init__(self, size: int, budget_s: float, recycle_bytes: int = RECYCLE_RSS_BYTES) -> None:
        self.size = size
        self.budget_s = budget_s
        self.recycle_bytes = recycle_bytes
        self._idle: list[Worker] = []
        self._all: set[Worker] = set()
        self._lock = threading.Lock()
        self._free: asyncio.Semaphore | None = None
        self._finalizer = weakref.finalize(self, _kill_all, self._all)

    async def run(self, function: Callable[..., Any], *args: Any) -> Answer:
        """`function(*args)`'s answer from a worker, within the budget."""
        if self._free is None:
            self._free = asyncio.Semaphore(self.size)
        async with self._free:
            worker = await asyncio.to_thread(self._take)
            loop = asyncio.get_running_loop()
            waiting = loop.run_in_executor(None, worker.call, function, args)
            try:
                answer = await asyncio.wait_for(waiting, self.budget_s)
            except BaseException:  # past the budget, stopped, or the request cancelled
                self._drop(worker)  # killed: the blocked call returns with WorkerStopped
                raise
            if worker.alive():
                with self._lock:
                    self._idle.append(worker)
            else:
                self._drop(worker)
            return answer

    def _take(self) -> Worker:
        """An idle worker, or a new one."""
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
                self._all.discard(worker)
                worker.kill()
        worker = Worker(self.recycle_bytes)
        with self._lock:
            self._all.add(worker)
        return worker

    def _drop(self, worker: Worker) -> None:
        with self._lock:
            self._all.discard(worker)
        worker.kill()

    def pids(self) -> list[int]:
        """The process ids of the workers now running (for tests and the benchmark)."""
        with self._lock:
            return [worker.process.pid for worker in self._all if worker.process.pid is not None]

    def close(self) -> None:
        """Stop every worker (the server's shutdown)."""
        with self._lock:
            workers = set(self._all)
            self._all.clear()
            self._idle.clear()
        _kill_all(workers)


def warm_up() -> None:
    """Start the fork server in the background (the engine's import is then paid before the
    first config or plan request). Safe to call more than once."""
    if sys.platform == "win32":
        return
    threading.Thread(target=_start_forkserver, daemon=True).start()


def _start_forkserver() -> None:
    context = _context()
    if hasattr(context, "get_start_method") and context.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
