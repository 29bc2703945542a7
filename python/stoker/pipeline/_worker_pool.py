"""A small thread pool the pipeline owns, so stopping it can bound how long it waits.

`concurrent.futures.ThreadPoolExecutor` joins its threads at interpreter exit with no time
limit, so one op stuck forever would hang the interpreter. These workers are daemon threads that
the pipeline joins with a timeout when it stops, and the engine never submits a task that blocks
waiting on another task, so a pool of any size makes progress.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from time import monotonic
from typing import Any

from .._bounded import shown_logger
from .._daemon_pool import join_at_exit
from ..errors import ConfigurationError

_logger = shown_logger("stoker.pipeline")


class _WorkerPool:
    """Runs submitted callables on up to ``max_threads`` daemon threads, started on demand."""

    def __init__(self, max_threads: int, name: str) -> None:
        if max_threads < 1:
            raise ConfigurationError(f"num_threads must be at least 1, got {max_threads}")
        self._max_threads = max_threads
        self._name = name
        self._tasks: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False
        # At the interpreter's exit a daemon thread inside a native op (a decode in Rust) is
        # unwound when it next asks for the GIL, and the process may die after the script
        # ended well (an autotune benchmark run exited with SIGSEGV, its workers still inside
        # their ops): the exit tells these threads to end and waits for them, bounded.
        join_at_exit(self)

    @property
    def threads(self) -> list[threading.Thread]:
        """The worker threads started so far."""
        return list(self._threads)

    def set_max_threads(self, max_threads: int) -> None:
        """Start up to ``max_threads`` threads from now on (threads already started stay, idle)."""
        with self._lock:
            self._max_threads = max(1, max_threads)

    def submit(self, function: Callable[..., Any], *args: Any) -> None:
        """Queue ``function(*args)``; start a thread if none is idle and the cap allows."""
        with self._lock:
            if self._closed:
                return
            if self._idle > 0:
                self._idle -= 1
            elif len(self._threads) < self._max_threads:
                thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        self._tasks.put((function, args))

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            function, args = task
            try:
                function(*args)
            except BaseException:  # the engine reports its own errors; this is a last resort
                _logger.exception("stoker worker %s: task raised", threading.current_thread().name)
            finally:
                del task, function, args
            with self._lock:
                self._idle += 1

    def stop_now(self) -> None:
        """Tell every thread to end once its current task is done (what the interpreter's exit
        calls before it waits for them: `stoker._daemon_pool.join_at_exit`)."""
        with self._lock:
            if self._closed:  # shut down already: each thread has its end queued
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._tasks.put(None)

    def shutdown(self, timeout: float) -> list[threading.Thread]:
        """Ask every thread to exit and wait up to ``timeout`` seconds in all.

        Returns:
            The threads still running when the time ran out (stuck in an op).
        """
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._tasks.put(None)
        deadline = monotonic() + timeout
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(max(0.0, deadline - monotonic()))
        return [thread for thread in threads if thread.is_alive() and thread is not current]
