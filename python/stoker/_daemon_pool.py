"""A thread pool whose threads never keep the interpreter from exiting.

`concurrent.futures.ThreadPoolExecutor` joins its threads at interpreter exit with no time
limit: one call stuck forever (a dataset's ``__getitem__`` waiting on a dead server, a read from
a hung network mount) would keep the process alive after the training script ended, after
Ctrl-C, after a timeout was raised. This pool's threads are daemons: what is still running at
exit is abandoned, as a stuck thread must be. It has the part of the executor's interface stoker
uses: `submit` returning a `concurrent.futures.Future`, and `shutdown`.

Abandoned, but not at any moment: at exit the interpreter ends a daemon thread when it next asks
for the GIL, by unwinding its stack (``pthread_exit``). A thread that is inside C++ or Rust code
at that moment (torch's collation, a native read) is unwound through frames that must not unwind,
and the process aborts (``terminate called without an active exception``) after the training
script ended well. So `join_at_exit` tells registered threads to stop at exit and waits for them
a bounded time (`EXIT_JOIN_SECONDS` in all): a thread that is working ends with its task, only a
stuck one is abandoned.
"""

from __future__ import annotations

import atexit
import queue
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from time import monotonic
from typing import Any, Protocol, TypeVar

from .errors import ConfigurationError

__all__ = ["EXIT_JOIN_SECONDS", "DaemonThreadPool", "join_at_exit"]

EXIT_JOIN_SECONDS = 5.0
"""How long, in all, the interpreter's exit waits for registered threads to end their tasks."""


class _StoppableThreads(Protocol):
    """Threads that can be told to end after their current task."""

    @property
    def threads(self) -> Sequence[threading.Thread]:
        """The threads started so far."""

    def stop_now(self) -> None:
        """Tell the threads to end once their current task is done, leaving what is queued."""


_registered: weakref.WeakSet[Any] = weakref.WeakSet()  # only what is still alive is stopped at exit
_registered_lock = threading.Lock()


def join_at_exit(owner: _StoppableThreads) -> None:
    """Have the interpreter's exit call ``owner.stop_now()`` and wait for ``owner.threads`` (bounded:
    see the module notes). Held weakly: an owner collected before exit is forgotten."""
    with _registered_lock:
        _registered.add(owner)


def _stop_registered_threads() -> None:
    with _registered_lock:
        owners = list(_registered)
    for owner in owners:
        owner.stop_now()
    deadline = monotonic() + EXIT_JOIN_SECONDS
    current = threading.current_thread()
    for owner in owners:
        for thread in list(owner.threads):
            if thread is not current:
                thread.join(max(0.0, deadline - monotonic()))


atexit.register(_stop_registered_threads)

_Result = TypeVar("_Result")


class _Workers:
    """What the threads share, and all they hold: not the pool, so that a pool nobody holds any
    more is collected and its threads told to end (as `ThreadPoolExecutor`'s are)."""

    def __init__(self) -> None:
        self.tasks: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.idle = 0
        self.stopping = False

    def work(self) -> None:
        while (task := self.tasks.get()) is not None:
            future, function, args = task
            if self.stopping:  # at exit: whoever waits on it is told, and this thread ends
                future.cancel()
                return
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(function(*args))
                except BaseException as error:  # carried to whoever waits on the future
                    future.set_exception(error)
            del task, future, function, args
            with self.lock:
                self.idle += 1

    def stop(self) -> None:
        """Tell every thread to end once the work queued before is done."""
        with self.lock:
            count = len(self.threads)
        for _ in range(count):
            self.tasks.put(None)

    def stop_now(self) -> None:
        """Tell every thread to end once its current task is done; what is queued is cancelled
        (whoever waits on it is told, rather than waiting on work no thread will do)."""
        self.stopping = True
        self.cancel_queued()
        self.stop()

    def cancel_queued(self) -> None:
        """Cancel the work no thread has taken yet."""
        while True:
            try:
                task = self.tasks.get_nowait()
            except queue.Empty:
                return
            if task is not None:
                task[0].cancel()


class DaemonThreadPool:
    """Up to ``max_workers`` daemon threads, started as work arrives; they end at `shutdown`, or
    when the pool is no longer referenced.

    Args:
        max_workers: The most threads at once.
        thread_name_prefix: Names the threads (``PREFIX-N``), for stack dumps and profilers.

    Raises:
        ValueError: ``max_workers`` below 1.
    """

    def __init__(self, max_workers: int, thread_name_prefix: str = "stoker") -> None:
        if max_workers < 1:
            raise ConfigurationError(f"max_workers must be at least 1, got {max_workers}")
        self._max_workers = max_workers
        self._prefix = thread_name_prefix
        self._workers = _Workers()
        self._closed = False
        self._finalizer = weakref.finalize(self, self._workers.stop)
        join_at_exit(self._workers)

    def submit(self, function: Callable[..., _Result], *args: Any) -> Future[_Result]:
        """Run ``function(*args)`` on a pool thread.

        Raises:
            RuntimeError: The pool was shut down.
        """
        future: Future[_Result] = Future()
        workers = self._workers
        with workers.lock:
            if self._closed:
                raise RuntimeError("cannot submit to a pool that was shut down")
            if workers.idle > 0:
                workers.idle -= 1
            elif len(workers.threads) < self._max_workers:
                thread = threading.Thread(target=workers.work, name=f"{self._prefix}-{len(workers.threads)}", daemon=True)
                workers.threads.append(thread)
                thread.start()
            workers.tasks.put((future, function, args))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; the threads end once the queue is drained (``cancel_futures``: queued
        work is cancelled instead). ``wait`` joins them, which a stuck call never lets end: stoker
        passes ``wait=False`` wherever a call may be stuck."""
        workers = self._workers
        with workers.lock:
            if self._closed:
                return
            self._closed = True
            threads = list(workers.threads)
        if cancel_futures:
            workers.cancel_queued()
        self._finalizer()  # the threads' stop, once
        if wait:
            current = threading.current_thread()
            for thread in threads:
                if thread is not current:
                    thread.join()
