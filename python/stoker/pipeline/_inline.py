"""Stages that only regroup items: aggregate (items into lists) and disaggregate (lists into items).

They do no work worth a thread, so the engine runs them inside its lock, right when their input
or output changes. They respect the same bounded queues as every other stage.
"""

from __future__ import annotations

from collections.abc import Iterator
from time import perf_counter
from typing import TYPE_CHECKING, Any

from ..failures import Failure
from ._buffer import _Buffer
from ._errors import short_repr
from ._spec import StageKind, StageSpec
from ._stats import StageStats, _TaskTimeHistogram

if TYPE_CHECKING:
    from ._scheduler import Scheduler


class _InlineStage:
    """Runtime state of an aggregate or disaggregate stage."""

    def __init__(self, spec: StageSpec, engine: Scheduler, input_buffer: _Buffer) -> None:
        self.spec = spec
        self.name = spec.name
        self.engine = engine
        self.input = input_buffer
        input_buffer.consumer = self
        self.output = _Buffer(spec.buffer_size)
        self.output.producer = self
        self.finished = False
        self.wake_pending = False
        self.items_in = 0
        self.items_out = 0
        self.failure_count = 0
        self.failure_records: list[Failure] = []
        self._batch: list[Any] = []
        self._pieces: Iterator[Any] | None = None
        self._wait_output = 0.0
        self._blocked_since: float | None = None

    def process(self) -> list[Failure]:
        """Move what can move now; return failures to log (outside the lock)."""
        if self.finished or self.engine.stopping:
            return []
        failures: list[Failure] = []
        if self.spec.kind == StageKind.AGGREGATE:
            self._aggregate()
        else:
            self._disaggregate(failures)
        self._note_blocked()
        return failures

    def _take(self) -> Any:
        item = self.input.pop()
        self.items_in += 1
        self.engine.wake(self.input.producer)
        return item

    def _put(self, item: Any) -> None:
        self.output.push(item)
        self.items_out += 1
        self.engine.wake(self.output.consumer)

    def _aggregate(self) -> None:
        size = self.spec.batch_size
        while self.input.items:
            if len(self._batch) == size - 1 and not self.output.has_room():
                return
            self._batch.append(self._take())
            if len(self._batch) == size:
                self._put(self._batch)
                self._batch = []
        if self.input.closed:
            if self._batch and not self.spec.drop_last:
                if not self.output.has_room():
                    return
                self._put(self._batch)
            self._batch = []
            self._close()

    def _disaggregate(self, failures: list[Failure]) -> None:
        while self.output.has_room():
            if self._pieces is not None:
                try:
                    self._put(next(self._pieces))
                    continue
                except StopIteration:
                    self._pieces = None
            if self.input.items:
                item = self._take()
                try:
                    self._pieces = iter(item)
                except TypeError as error:
                    record = Failure(
                        short_repr(item),
                        self.name,
                        f"TypeError: {error}",
                        "dropped",
                        position=self.items_in - 1,
                        error_type="builtins.TypeError",
                    )
                    self.failure_count += 1
                    self.failure_records.append(record)
                    failures.append(record)
                continue
            if self.input.closed:
                self._close()
            return

    def _close(self) -> None:
        self.finished = True
        self.output.closed = True
        self.engine.wake(self.output.consumer)

    def _note_blocked(self) -> None:
        blocked = not self.finished and bool(self.input.items) and not self.output.has_room()
        now = perf_counter()
        if blocked and self._blocked_since is None:
            self._blocked_since = now
        elif not blocked and self._blocked_since is not None:
            self._wait_output += now - self._blocked_since
            self._blocked_since = None

    def busy_seconds(self, now: float) -> float:
        """Inline stages run no tasks (they move items inside the engine's lock)."""
        return 0.0

    def snapshot(self, started: float) -> StageStats:
        now = perf_counter()
        elapsed = (self.engine.ended_at or now) - started
        blocked = now - self._blocked_since if self._blocked_since is not None else 0.0
        return StageStats(
            name=self.name,
            kind=self.spec.kind,
            concurrency=1,
            items_in=self.items_in,
            items_out=self.items_out,
            failures=self.failure_count,
            task_time=_TaskTimeHistogram().summary(),
            task_cpu_seconds=0.0,
            busy_tasks_mean=0.0,
            wait_input_seconds=0.0,
            wait_output_seconds=self._wait_output + blocked,
            queue_capacity=self.output.capacity,
            queue_length=len(self.output.items),
            queue_length_mean=self.output.mean_length(started),
            elapsed_seconds=elapsed,
        )
