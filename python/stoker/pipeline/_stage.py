"""One stage while the pipeline runs: which task may start, where results go, when it ends.

Every method here runs under the engine's lock and does no user work; the engine calls the op
outside the lock and reports the outcome back through `emit`, `finish` and `park`.
"""

from __future__ import annotations

from collections import deque
from numbers import Integral
from time import perf_counter
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..failures import Failure
from ._buffer import _Buffer
from ._spec import OpKind, StageKind, StageSpec
from ._stats import StageStats, _TaskTimeHistogram

if TYPE_CHECKING:
    from ._scheduler import Scheduler

# Failures a stage keeps for its error message; all are counted and logged.
_FAILURE_RECORDS_KEPT = 100


class _Job:
    """One input item's trip through a stage (several steps for a generator op)."""

    __slots__ = ("seq", "item", "generator", "reserved")

    def __init__(self, seq: int, item: Any) -> None:
        self.seq = seq
        self.item = item
        self.generator: Any = None
        self.reserved = False


class _OrderSlot:
    """Outputs of one sequence number, held until every earlier one is released."""

    __slots__ = ("values", "done")

    def __init__(self) -> None:
        self.values: list[tuple[Any, bool]] = []  # (value, holds a reservation)
        self.done = False


class _Stage:
    """Runtime state of a stage that runs tasks (a source or a pipe)."""

    def __init__(self, spec: StageSpec, engine: Scheduler, input_buffer: _Buffer | None) -> None:
        self.spec = spec
        self.name = spec.name
        self.engine = engine
        self.concurrency = spec.concurrency
        # Decided once: a stage whose concurrency is raised while it runs must already be
        # keeping input order (switching mid-run would lose the sequence numbers' meaning).
        self.ordered = spec.ordered
        self.is_generator = spec.op_kind in (OpKind.GENERATOR, OpKind.ASYNC_GENERATOR)
        self.input = input_buffer
        # Reservations count toward capacity, so the queue holds buffer_size finished items
        # while every task slot still has room for its result.
        self.output = _Buffer(spec.buffer_size + spec.concurrency)
        self.output.producer = self
        if input_buffer is not None:
            input_buffer.consumer = self
        self.runners = 0
        self.in_flight = 0
        self.parked: deque[_Job] = deque()
        self.next_seq = 0
        self.head_seq = 0
        self.reorder: dict[int, _OrderSlot] = {}
        self.exhausted = False  # a source with nothing more to give
        self.finished = False
        self.wake_pending = False
        self.iterator: Any = None
        # Statistics.
        self.items_in = 0
        self.items_out = 0
        self.failure_count = 0
        self.failure_records: list[Failure] = []
        self.task_times = _TaskTimeHistogram()
        # Each step's thread CPU seconds, measured in the runner's thread and added under the
        # engine's lock like every other figure (a `+=` without it lost updates: a load and a
        # store that another thread's step may come between).
        self.task_cpu_seconds = 0.0
        self._busy_area = 0.0
        self._wait_input = 0.0
        self._wait_output = 0.0
        self._state = ""  # "", "input" or "output": what the stage is waiting on now
        self._state_since = perf_counter()
        self._last_event = perf_counter()

    # ---- deciding what may run -------------------------------------------------------------

    def _input_available(self) -> bool:
        if self.spec.kind == StageKind.SOURCE:
            return not self.exhausted
        return bool(self.input.items)  # type: ignore[union-attr]

    def _step_allowed(self, job: _Job) -> bool:
        """Whether a parked generator may take its next step now."""
        if not self.ordered:
            return self.output.can_reserve()
        if job.seq == self.head_seq:
            return self.output.has_room()
        return not self.reorder[job.seq].values

    def has_work(self) -> bool:
        """Whether a runner started now would find a job."""
        if self.engine.stopping:
            return False
        for job in self.parked:
            if self._step_allowed(job):
                return True
        return self._new_job_allowed()

    def _new_job_allowed(self) -> bool:
        if self.in_flight >= self.concurrency or not self._input_available():
            return False
        if self.ordered and self.next_seq - self.head_seq >= self.concurrency:
            return False
        return self.output.can_reserve()

    def claim(self) -> _Job | None:
        """Take the next job: a parked generator that may step, else a new input item."""
        if self.engine.stopping:
            return None
        for job in self.parked:
            if self._step_allowed(job):
                self.parked.remove(job)
                self._reserve_step(job)
                return job
        if not self._new_job_allowed():
            self._update_wait_state()
            return None
        self._account_busy()
        self.output.reserved += 1
        item = None
        if self.spec.kind != StageKind.SOURCE:
            item = self.input.pop()  # type: ignore[union-attr]
            self.engine.wake(self.input.producer)  # type: ignore[union-attr]
            self.items_in += 1
        job = _Job(self.next_seq, item)
        job.reserved = True
        if self.ordered:
            self.reorder[self.next_seq] = _OrderSlot()
        self.next_seq += 1
        self.in_flight += 1
        self._update_wait_state()
        return job

    def _reserve_step(self, job: _Job) -> None:
        # In input order only the head streams straight out, so others never hold a slot the
        # head needs; a non-head generator buffers at most one value (see _step_allowed).
        if not self.ordered or job.seq != self.head_seq:
            self.output.reserved += 1
            job.reserved = True

    def set_concurrency(self, concurrency: int) -> None:
        """Run up to ``concurrency`` tasks from now on. Raising it makes room in the output queue
        for the new tasks' results; lowering it lets running tasks finish (runners beyond the new
        limit stop claiming jobs), so nothing in flight is dropped."""
        # A whole number, as the builder asks: 2.5 or True was taken (a float capacity in the
        # output queue), and None or "x" failed with a TypeError from the comparison.
        if isinstance(concurrency, bool) or not isinstance(concurrency, Integral) or concurrency < 1:
            raise ConfigurationError(f"stage {self.name!r}: concurrency must be at least 1 (a whole number), got {concurrency!r}")
        concurrency = int(concurrency)
        self.output.capacity += concurrency - self.concurrency
        self._account_busy()
        self.concurrency = concurrency
        self._update_wait_state()
        self.engine.wake(self)

    # ---- taking results --------------------------------------------------------------------

    def emit(self, job: _Job, value: Any) -> None:
        """Put one result out, in completion order or held for input order."""
        self.items_out += 1
        if self.spec.kind == StageKind.SOURCE:
            self.items_in += 1
        if not self.ordered:
            self.output.reserved -= 1
            job.reserved = False
            self.output.push(value)
            self.engine.wake(self.output.consumer)
            return
        self.reorder[job.seq].values.append((value, job.reserved))
        job.reserved = False
        self._release_in_order()

    def continue_generator(self, job: _Job) -> bool:
        """After a generator's step: take the next step now (True) or park the job (False)."""
        if self._step_allowed(job) and not self.engine.stopping:
            self._reserve_step(job)
            return True
        self.parked.append(job)
        self._update_wait_state()
        return False

    def finish(self, job: _Job) -> None:
        """The job is over (its function returned, its generator ended, or it failed)."""
        self._account_busy()
        if job.reserved:
            self.output.reserved -= 1
            job.reserved = False
        self.in_flight -= 1
        if self.ordered:
            self.reorder[job.seq].done = True
            self._release_in_order()
        self.engine.wake(self)
        self.check_end()

    def record_failure(self, record: Failure) -> None:
        self.failure_count += 1
        if len(self.failure_records) < _FAILURE_RECORDS_KEPT:
            self.failure_records.append(record)

    def _release_in_order(self) -> None:
        released = False
        while True:
            slot = self.reorder.get(self.head_seq)
            if slot is None:
                break
            for value, holds_reservation in slot.values:
                if holds_reservation:
                    self.output.reserved -= 1
                self.output.push(value)
                released = True
            slot.values.clear()
            if not slot.done:
                break
            del self.reorder[self.head_seq]
            self.head_seq += 1
            self.engine.wake(self)  # a parked generator may have become the head
        if released:
            self.engine.wake(self.output.consumer)

    def check_end(self) -> None:
        """Close the output once the input is done and nothing is in flight."""
        if self.finished:
            return
        if self.spec.kind == StageKind.SOURCE:
            upstream_done = self.exhausted
        else:
            upstream_done = self.input.closed and not self.input.items  # type: ignore[union-attr]
        if upstream_done and self.in_flight == 0 and not self.parked and not self.reorder:
            self.finished = True
            self._account_busy()
            self._set_state("")
            self.output.closed = True
            self.engine.wake(self.output.consumer)

    # ---- statistics ------------------------------------------------------------------------

    def _account_busy(self) -> None:
        # Time after the pipeline ended does not count: tasks abandoned by a stop finish later.
        now = min(perf_counter(), self.engine.ended_at or float("inf"))
        self._busy_area += self.in_flight * max(0.0, now - self._last_event)
        self._last_event = max(now, self._last_event)

    def _update_wait_state(self) -> None:
        if self.finished or self.in_flight >= self.concurrency:
            self._set_state("")
        elif self._input_available() or self.parked:
            self._set_state("" if self.output.can_reserve() else "output")
        elif self.input is not None and not self.input.closed:
            self._set_state("input")
        else:
            self._set_state("")

    def _set_state(self, state: str) -> None:
        if state == self._state:
            return
        now = perf_counter()
        if self._state == "input":
            self._wait_input += now - self._state_since
        elif self._state == "output":
            self._wait_output += now - self._state_since
        self._state = state
        self._state_since = now

    def _waited(self, state: str, now: float) -> float:
        return now - self._state_since if self._state == state else 0.0

    def busy_seconds(self, now: float) -> float:
        """Task-seconds run so far (the integral of tasks in flight): its growth over an interval,
        divided by the interval and the concurrency, is the share of slots busy then."""
        return self._busy_area + self.in_flight * max(0.0, now - self._last_event)

    def snapshot(self, started: float) -> StageStats:
        now = perf_counter()
        end = self.engine.ended_at or now
        elapsed = end - started
        # Tasks abandoned by a stop are not busy after the stop.
        busy = self._busy_area + self.in_flight * max(0.0, end - self._last_event)
        return StageStats(
            name=self.name,
            kind=self.spec.kind,
            concurrency=self.concurrency,
            items_in=self.items_in,
            items_out=self.items_out,
            failures=self.failure_count,
            task_time=self.task_times.summary(),
            task_cpu_seconds=self.task_cpu_seconds,
            busy_tasks_mean=busy / elapsed if elapsed > 0 else 0.0,
            wait_input_seconds=self._wait_input + self._waited("input", now),
            wait_output_seconds=self._wait_output + self._waited("output", now),
            queue_capacity=self.output.capacity,  # finished items it may hold: buffer_size + concurrency
            queue_length=len(self.output.items),
            queue_length_mean=self.output.mean_length(started),
            elapsed_seconds=elapsed,
        )
