"""The running pipeline as its user sees it: an iterator with a clean stop."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from ..errors import PipelineStoppedError
from ._engine import _Engine
from ._stats import PipelineStats

__all__ = ["Pipeline"]

T = TypeVar("T")

# Seconds `stop()` waits for ops still running before it leaves their (daemon) threads behind.
_STOP_TIMEOUT = 10.0


class Pipeline(Generic[T]):
    """A built pipeline. Iterate it to get the sink's items.

    The pipeline starts on the first item requested (or on `start`). It is one pass over its
    source: once the pass ends (the source is exhausted, the loop breaks, an error is raised,
    or `stop` is called) the threads are gone, and iterating again raises
    `PipelineStoppedError`. Build a new pipeline for another pass.

    Two ways to consume it:

    - ``for item in pipeline:`` iterates through a generator that stops the pipeline when the
      loop ends for any reason: exhausted, ``break``, an exception in the loop body, Ctrl-C.
    - ``next(pipeline)`` takes one item at a time and leaves stopping to you; use
      ``with pipeline.auto_stop():`` (or call `stop`) so no thread outlives its use.

    A pipeline that is dropped without being stopped is stopped when it is garbage collected,
    and at interpreter exit at the latest; its threads are daemon threads, so exit never hangs.
    """

    def __init__(self, engine: _Engine) -> None:
        self._engine = engine
        self._start_lock = threading.Lock()
        self._started = False
        self._finalizer = weakref.finalize(self, engine.stop, _STOP_TIMEOUT)

    @property
    def name(self) -> str:
        """The pipeline's name, used in logs and thread names."""
        return self._engine.name

    def start(self) -> None:
        """Start the background threads now instead of at the first item. Idempotent.

        Raises:
            PipelineStoppedError: The pipeline was already stopped.
        """
        with self._start_lock:
            if self._engine.stopped:
                raise PipelineStoppedError(f"pipeline {self.name} is stopped; build a new one")
            if self._started:
                return
            self._started = True
            self._engine.start()

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """Stop every stage and join the threads. Idempotent; safe from any thread.

        Args:
            timeout: Seconds to wait for ops still running; threads stuck in an op longer than
                that are left to finish on their own (they are daemon threads) and a warning
                is logged.
        """
        with self._start_lock:  # so a concurrent start() finishes before the stop
            self._engine.stop(timeout)

    @contextmanager
    def auto_stop(self) -> Iterator[Pipeline[T]]:
        """Start the pipeline and stop it when the block exits, however it exits."""
        self.start()
        try:
            yield self
        finally:
            self.stop()

    def get(self, timeout: float | None = None) -> T:
        """Return the next item, waiting up to ``timeout`` seconds (None: no limit).

        Raises:
            StopIteration: The source is exhausted and every item was delivered.
            PipelineFailureError: A stage ran past its failure budget.
            PipelineStoppedError: The pipeline was stopped.
            TimeoutError: No item arrived in time.
            Exception: The source's own error, after the items read before it were delivered.
        """
        if not self._started and not self._engine.stopped:
            self.start()
        return self._engine.take(timeout)

    def __next__(self) -> T:
        return self.get()

    def __iter__(self) -> Iterator[T]:
        if self._engine.stopped:
            raise PipelineStoppedError(f"pipeline {self.name} is stopped; a pipeline is one pass over its source, build a new one")
        return self._iterate()

    def _iterate(self) -> Iterator[T]:
        try:
            while True:
                try:
                    item = self.get()
                except StopIteration:
                    return
                yield item
        finally:
            self.stop()

    # ---- changing it while it runs (a live tuner, or by hand) -------------------------------

    def concurrency(self, stage: str) -> int:
        """Tasks stage ``stage`` may run at once now.

        Raises:
            KeyError: No stage has that name.
        """
        return int(getattr(self._engine.stage(stage), "concurrency", 1))

    def set_concurrency(self, stage: str, concurrency: int) -> None:
        """Let ``stage`` run up to ``concurrency`` tasks from now on, while the pipeline runs.
        Order and results are unaffected: tasks in flight finish, and a stage that keeps input
        order keeps it.

        Raises:
            KeyError: No stage has that name.
            ValueError: ``concurrency`` below 1, or an aggregate or disaggregate stage.
        """
        self._engine.set_concurrency(stage, concurrency)

    @property
    def sink_size(self) -> int:
        """Finished items kept ready for the consumer."""
        return self._engine.sink_size

    def set_sink_size(self, size: int) -> None:
        """Keep up to ``size`` finished items ready for the consumer from now on.

        Raises:
            ValueError: ``size`` below 1.
        """
        self._engine.set_sink_size(size)

    def add_monitor(self, monitor: Callable[[], None]) -> None:
        """Call ``monitor()`` on the scheduler thread after every stats sample (each
        ``stats_interval``) while the pipeline runs: for a live tuner or an exporter. It must
        return quickly; one that raises is logged and removed."""
        self._engine.add_monitor(monitor)

    def stats(self) -> PipelineStats:
        """Per-stage statistics now, as plain data. Cheap; callable from any thread at any time."""
        return self._engine.stats()

    def threads(self) -> list[threading.Thread]:
        """The threads the pipeline started (for tests and diagnostics)."""
        return self._engine.threads()

    def __repr__(self) -> str:
        stages = " -> ".join(stage.name for stage in self._engine.stages)
        return f"<Pipeline {self.name}: {stages}>"
