"""The engine: one lock, one scheduler thread with an asyncio loop, one worker pool.

How an item moves: a runner (a loop in a pool thread for sync ops, a task on the event loop for
async ops and executor stages) claims a job from its stage under the lock, runs the op outside the
lock, and hands the result back under the lock. Handing back wakes the neighbour stages; a woken
stage with work and a free slot gets a new runner. A runner keeps claiming jobs until its stage has
none, so a busy stage costs one thread hand-off per burst instead of one per item; that is where
the time goes in a per-item design (a future, a queue put and a cross-thread wake-up per item
per stage).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import traceback
from collections import deque
from collections.abc import Callable
from enum import Enum
from time import perf_counter, thread_time
from typing import Any

from .._bounded import Lines, shown_logger
from ..errors import ConfigurationError, PipelineFailureError, PipelineStoppedError
from ..failures import Failure, error_text, qualified_name
from ._buffer import StageRunner, _Buffer
from ._errors import AbortPipeline, short_repr
from ._inline import _InlineStage
from ._spec import OpKind, StageKind, StageSpec
from ._stage import _Job, _Stage
from ._stats import PipelineStats

_logger = shown_logger("stoker.pipeline")

# Failures logged with a full traceback per stage; later ones get one line each.
_TRACEBACKS_LOGGED = 20
# Samples kept for the timeline (at the default interval, about an hour).
_TIMELINE_SAMPLES = 14_400


class _Outcome(Enum):
    """What one step of an op gave: a value, the end of its outputs, or an error."""

    VALUE = "value"
    DONE = "done"
    FAILED = "failed"


class _Engine:
    """Runs the stages of one pipeline. Created by `Pipeline`; not public."""

    def __init__(
        self,
        specs: list[StageSpec],
        sink_size: int,
        num_threads: int,
        name: str,
        sample_interval: float,
        report_interval: float | None,
    ) -> None:
        self.name = name
        self.lock = threading.Lock()
        self.consumer_ready = threading.Condition(self.lock)
        self.stopping = False
        self.stopped = False
        self.error: BaseException | None = None
        self.source_error: BaseException | None = None
        self.ended_at: float | None = None
        self.started_at: float | None = None
        self.consumer_wait = 0.0  # seconds the consumer waited for the items it took
        # When the consumer's wait now began (None: it is not waiting): a wait in progress counts
        # in the stats, so a loop waiting for its first item is not read as fed. Under the lock.
        self.waiting_since: float | None = None
        self.items_consumed = 0
        self.timeline: deque[dict[str, Any]] = deque(maxlen=_TIMELINE_SAMPLES)
        self._pending: deque[StageRunner | None] = deque()
        self._num_threads = num_threads
        self._sample_interval = sample_interval
        self._report_interval = report_interval
        self._last_report = 0.0
        self._pool: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop_tasks: set[asyncio.Task[Any]] = set()
        # Called on the scheduler thread after each timeline sample (a live tuner, a meter).
        # Added to, taken from and copied under the lock (`add_monitor`, `_sample`, `stop`).
        self.monitors: list[Callable[[], None]] = []
        self.stages: list[StageRunner] = []
        upstream: _Buffer | None = None
        for spec in specs:
            stage = _InlineStage(spec, self, upstream) if spec.runs_inline else _Stage(spec, self, upstream)  # type: ignore[arg-type]
            self.stages.append(stage)
            upstream = stage.output
        # The last stage's queue is the sink the consumer reads.
        self.sink: _Buffer = upstream  # type: ignore[assignment]
        last = self.stages[-1]
        self.sink.capacity = sink_size + (0 if last.spec.runs_inline else last.spec.concurrency)

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the scheduler thread and the pool, and wake the source."""
        from ._worker_pool import _WorkerPool

        self.started_at = perf_counter()
        for stage in self.stages:
            stage.output.start_clock(self.started_at)
        with self.lock:
            self._record_sample()  # the timeline starts at zero, however short the run
            # Sized and set under the lock: a concurrency raised before now, or while it starts
            # (set_concurrency then finds the pool), gets its threads.
            self._pool = _WorkerPool(self._pool_threads(), f"stoker-{self.name}-worker")
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready = threading.Event()
        self._loop_thread = threading.Thread(target=self._run_loop, args=(loop, ready), name=f"stoker-{self.name}-scheduler", daemon=True)
        self._loop_thread.start()
        ready.wait()
        with self.lock:
            self.wake(self.stages[0])
            starts = self.drain()
        self.start_runners(starts)

    def _run_loop(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.call_later(self._sample_interval, self._sample)
        try:
            loop.run_forever()
        finally:
            try:
                tasks = [task for task in self._loop_tasks if not task.done()]
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def stop(self, timeout: float) -> None:
        """Stop every runner and thread; wait up to ``timeout`` seconds for ops in progress."""
        with self.lock:
            if self.stopped:
                return
            self.stopped = True
            self.stopping = True
            if self.started_at is not None:
                self._record_sample()  # and ends with the final counts
            if self.ended_at is None:
                self.ended_at = perf_counter()
            self.consumer_ready.notify_all()
            parked = [job for stage in self.stages if isinstance(stage, _Stage) for job in stage.parked]
            # A monitor usually holds the Pipeline; the Pipeline's finalizer holds this engine.
            self.monitors = []
        loop, thread = self._loop, self._loop_thread
        if loop is not None and thread is not None and thread.is_alive():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:  # the loop closed in the meantime
                pass
            if thread is not threading.current_thread():
                thread.join(timeout)
        stuck = self._pool.shutdown(timeout) if self._pool is not None else []
        if self.started_at is not None and _logger.isEnabledFor(logging.INFO):
            _logger.info("pipeline %s ended:\n%s", self.name, Lines(self.stats().format_table()))
        for job in parked:
            if job.generator is not None and hasattr(job.generator, "close"):
                try:
                    job.generator.close()
                except Exception:
                    _logger.debug("closing a parked generator raised", exc_info=True)
        if stuck:
            _logger.warning(
                "pipeline %s stopped, but %d worker thread(s) are still inside an op after %.1fs; "
                "they are daemon threads and end with the op",
                self.name,
                len(stuck),
                timeout,
            )

    def threads(self) -> list[threading.Thread]:
        """Every thread this engine started."""
        threads = list(self._pool.threads) if self._pool is not None else []
        if self._loop_thread is not None:
            threads.append(self._loop_thread)
        return threads

    # ---- changing concurrency while it runs -----------------------------------------------

    def stage(self, name: str) -> StageRunner:
        """The stage called ``name``.

        Raises:
            KeyError: No stage has that name.
        """
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"pipeline {self.name} has no stage {name!r}; its stages are {[stage.name for stage in self.stages]}")

    def set_concurrency(self, name: str, concurrency: int) -> None:
        """Let stage ``name`` run up to ``concurrency`` tasks from now on (see `_Stage.set_concurrency`)."""
        stage = self.stage(name)
        if not isinstance(stage, _Stage):
            raise ConfigurationError(f"stage {name!r} moves items inside the engine; it has no concurrency to set")
        with self.lock:
            stage.set_concurrency(concurrency)
            if stage is self.stages[-1]:
                self.consumer_ready.notify_all()
            if self._pool is not None:
                self._pool.set_max_threads(self._pool_threads())
            starts = self.drain()
        self.start_runners(starts)

    def _pool_threads(self) -> int:
        """Threads the pool may start: the pipeline's setting, or the sum of the sync stages'
        concurrency now, whichever is more. Under the lock."""
        wanted = sum(each.concurrency for each in self.stages if isinstance(each, _Stage) and not each.spec.runs_on_loop)
        return max(self._num_threads, wanted)

    def set_sink_size(self, size: int) -> None:
        """Keep up to ``size`` finished items ready for the consumer from now on."""
        if size < 1:
            raise ConfigurationError(f"the sink holds at least 1 item, got {size}")
        with self.lock:
            last = self.stages[-1]
            self.sink.capacity = size + (last.concurrency if isinstance(last, _Stage) else 0)
            self.wake(last)
            starts = self.drain()
        self.start_runners(starts)

    @property
    def sink_size(self) -> int:
        """Finished items the sink keeps ready for the consumer. Read under the lock: the sink's
        capacity and the last stage's concurrency change together (`_Stage.set_concurrency`)."""
        last = self.stages[-1]
        with self.lock:
            return self.sink.capacity - (last.concurrency if isinstance(last, _Stage) else 0)

    def add_monitor(self, monitor: Callable[[], None]) -> None:
        """Call ``monitor`` on the scheduler thread after each sample (see `Pipeline.add_monitor`)."""
        with self.lock:
            self.monitors.append(monitor)

    # ---- waking stages ---------------------------------------------------------------------

    def wake(self, stage: StageRunner | None) -> None:
        """Note that ``stage`` (None: the consumer) may be able to act. Call under the lock."""
        if stage is None:
            self._pending.append(None)
        elif not stage.wake_pending:
            stage.wake_pending = True
            self._pending.append(stage)

    def drain(self) -> list[_Stage]:
        """Act on every woken stage; return the stages that need a new runner. Under the lock."""
        starts: list[_Stage] = []
        pending = self._pending
        failures: list[tuple[StageRunner, Failure]] = []
        while pending:
            stage = pending.popleft()
            if stage is None:
                self.consumer_ready.notify_all()
                continue
            stage.wake_pending = False
            if isinstance(stage, _InlineStage):
                for record in stage.process():
                    failures.append((stage, record))
                continue
            assert isinstance(stage, _Stage)
            stage.check_end()
            if stage.runners < stage.concurrency and stage.has_work():
                stage.runners += 1
                starts.append(stage)
        for stage, record in failures:
            _logger.error("pipeline %s: %s", self.name, record.describe())
            self._check_budget(stage)
        return starts

    def start_runners(self, stages: list[_Stage]) -> None:
        """Start one runner per entry, outside the lock."""
        for stage in stages:
            if stage.spec.runs_on_loop:
                loop = self._loop
                try:
                    loop.call_soon_threadsafe(self._spawn_async_runner, stage)  # type: ignore[union-attr]
                except RuntimeError:  # loop closed: the pipeline is stopping
                    with self.lock:
                        stage.runners -= 1
            else:
                self._pool.submit(self._run_sync, stage)

    def _spawn_async_runner(self, stage: _Stage) -> None:
        task = asyncio.ensure_future(self._run_async(stage))
        self._loop_tasks.add(task)
        task.add_done_callback(self._loop_tasks.discard)

    # ---- runners ---------------------------------------------------------------------------

    def _run_sync(self, stage: _Stage) -> None:
        try:
            with self.lock:
                job = self._claim(stage)
                starts = self.drain()
            if starts:
                self.start_runners(starts)
            while job is not None:
                outcome, value, seconds, cpu_seconds = self._execute(stage, job)
                job, starts = self._complete(stage, job, outcome, value, seconds, cpu_seconds)
                if starts:
                    self.start_runners(starts)
        except BaseException as error:  # KeyboardInterrupt or a bug: never lose it silently
            self.fail(error)

    async def _run_async(self, stage: _Stage) -> None:
        try:
            with self.lock:
                job = self._claim(stage)
                starts = self.drain()
            if starts:
                self.start_runners(starts)
            while job is not None:
                outcome, value, seconds = await self._execute_async(stage, job)
                job, starts = self._complete(stage, job, outcome, value, seconds, 0.0)
                if starts:
                    self.start_runners(starts)
        except asyncio.CancelledError:
            with self.lock:
                stage.runners -= 1
            raise
        except BaseException as error:
            self.fail(error)

    def _claim(self, stage: _Stage) -> _Job | None:
        job = stage.claim()
        if job is None:
            stage.runners -= 1
        return job

    def _execute(self, stage: _Stage, job: _Job) -> tuple[_Outcome, Any, float, float]:
        """Run one step of ``job`` in this thread, outside the lock: what it gave, its seconds, and
        the CPU seconds of this thread meanwhile (added to the stage's under the lock, by
        `_complete`: many runner threads end steps at once)."""
        started = perf_counter()
        cpu_started = thread_time()
        try:
            if stage.spec.kind == StageKind.SOURCE:
                if stage.iterator is None:
                    stage.iterator = iter(stage.spec.source)
                value = next(stage.iterator)
            elif job.generator is not None:
                value = next(job.generator)
            elif stage.spec.op_kind == OpKind.GENERATOR:
                job.generator = stage.spec.op(job.item)  # type: ignore[misc]
                value = next(job.generator)
            else:
                value = stage.spec.op(job.item)  # type: ignore[misc]
        except StopIteration:
            value, outcome = None, _Outcome.DONE
        except Exception as error:
            value, outcome = error, _Outcome.FAILED
        else:
            outcome = _Outcome.VALUE
        # CPU time of the op's own thread: near its wall time for CPU-bound work, near zero for
        # work that waits (I/O, sleeps). The diagnosis tells the two apart with it.
        return outcome, value, perf_counter() - started, thread_time() - cpu_started

    async def _execute_async(self, stage: _Stage, job: _Job) -> tuple[_Outcome, Any, float]:
        spec = stage.spec
        started = perf_counter()
        try:
            if spec.kind == StageKind.SOURCE:
                if stage.iterator is None:
                    stage.iterator = spec.source.__aiter__()
                value = await stage.iterator.__anext__()
            elif job.generator is not None:
                value = await job.generator.__anext__()
            elif spec.op_kind == OpKind.ASYNC_GENERATOR:
                job.generator = spec.op(job.item)  # type: ignore[misc]
                value = await job.generator.__anext__()
            elif spec.executor is not None:
                assert spec.op is not None  # a stage with an executor is a sync op
                value = await asyncio.get_running_loop().run_in_executor(spec.executor, spec.op, job.item)
            else:
                value = await spec.op(job.item)  # type: ignore[misc]
        except (StopAsyncIteration, StopIteration):
            return _Outcome.DONE, None, perf_counter() - started
        except Exception as error:
            return _Outcome.FAILED, error, perf_counter() - started
        return _Outcome.VALUE, value, perf_counter() - started

    def _complete(
        self, stage: _Stage, job: _Job, outcome: _Outcome, value: Any, seconds: float, cpu_seconds: float
    ) -> tuple[_Job | None, list[Any]]:
        """Hand a step's outcome, its seconds and its thread's CPU seconds (0 on the event loop) to
        the stage; return the runner's next job and stages to start."""
        record = None
        abort = value.error if outcome == _Outcome.FAILED and isinstance(value, AbortPipeline) else None
        with self.lock:
            stage.task_times.record(seconds)
            stage.task_cpu_seconds += cpu_seconds
            next_job: _Job | None = None
            if outcome == _Outcome.VALUE:
                stage.emit(job, value)
                if job.generator is not None and stage.continue_generator(job):
                    next_job = job
                elif job.generator is None:
                    stage.finish(job)
            elif outcome == _Outcome.DONE:
                if stage.spec.kind == StageKind.SOURCE:
                    stage.exhausted = True
                stage.finish(job)
            elif abort is not None:
                if stage.spec.kind == StageKind.SOURCE:
                    stage.exhausted = True
                stage.finish(job)
            else:
                if stage.spec.kind == StageKind.SOURCE:
                    stage.exhausted = True
                    self.source_error = value
                else:
                    record = self._failure_record(stage, job, value)
                    stage.record_failure(record)
                stage.finish(job)
            if next_job is None:
                next_job = self._claim(stage)
            starts = self.drain()
        if abort is not None:
            self.fail(abort)
        elif record is not None:
            self._log_failure(stage, record, value)
            self._check_budget(stage)
        elif outcome == _Outcome.FAILED:
            # The consumer gets this error, traceback and all: logging it too would say it twice.
            _logger.debug("pipeline %s: source %r failed", self.name, stage.name, exc_info=value)
        return next_job, starts

    # ---- failures --------------------------------------------------------------------------

    @staticmethod
    def _failure_record(stage: _Stage, job: _Job, error: BaseException) -> Failure:
        return Failure(
            sample=short_repr(job.item),
            stage=stage.name,
            error=error_text(error),
            action="dropped",
            position=job.seq,
            error_type=qualified_name(error),
            traceback="".join(traceback.format_exception(type(error), error, error.__traceback__)),
        )

    def _log_failure(self, stage: _Stage, record: Failure, error: BaseException) -> None:
        if stage.failure_count <= _TRACEBACKS_LOGGED:
            _logger.error("pipeline %s: %s", self.name, record.describe(), exc_info=error)
        else:
            _logger.error("pipeline %s: %s", self.name, record.describe())

    def _check_budget(self, stage: StageRunner) -> None:
        budget = stage.spec.max_failures
        if budget is not None and stage.failure_count > budget:
            self.fail(PipelineFailureError(stage.name, budget, stage.failure_count, stage.failure_records))

    def fail(self, error: BaseException) -> None:
        """Stop the pipeline; the consumer gets ``error`` at its next request."""
        with self.lock:
            if self.error is None:
                self.error = error
            self.stopping = True
            if self.ended_at is None:
                self.ended_at = perf_counter()
            self.consumer_ready.notify_all()

    # ---- the consumer's side ---------------------------------------------------------------

    def take(self, timeout: float | None) -> Any:
        """Block until the next item; raise StopIteration at the end, or the pipeline's error.

        Raises:
            TimeoutError: No item within ``timeout`` seconds.
        """
        deadline = None if timeout is None else perf_counter() + timeout
        waited_from = perf_counter()
        with self.lock:
            self.waiting_since = waited_from
            try:
                while True:
                    if self.error is not None:
                        raise self.error
                    sink = self.sink
                    if self.stopped and sink.items:  # dropped with the pass, not handed out
                        raise PipelineStoppedError(f"pipeline {self.name} was stopped")
                    if sink.items:
                        item = sink.pop()
                        self.items_consumed += 1
                        self.consumer_wait += perf_counter() - waited_from
                        self.wake(sink.producer)
                        starts = self.drain()
                        break
                    if sink.closed:
                        if self.ended_at is None:
                            self.ended_at = perf_counter()
                        if self.source_error is not None:
                            raise self.source_error
                        raise StopIteration
                    if self.stopping:
                        raise PipelineStoppedError(f"pipeline {self.name} was stopped")
                    remaining = 1.0 if deadline is None else min(1.0, deadline - perf_counter())
                    if remaining <= 0:
                        raise TimeoutError(f"pipeline {self.name}: no item within {timeout} s")
                    self.consumer_ready.wait(remaining)
            finally:
                self.waiting_since = None
        if starts:
            self.start_runners(starts)
        return item

    def _consumer_wait(self, now: float) -> float:
        """Seconds the consumer waited for data by ``now``: for the items it took, and the wait
        in progress (a loop waiting for its first item has waited, not been fed). Under the lock."""
        if self.waiting_since is None:
            return self.consumer_wait
        return self.consumer_wait + max(0.0, now - self.waiting_since)

    # ---- statistics ------------------------------------------------------------------------

    def stats(self) -> PipelineStats:
        with self.lock:
            started = self.started_at or perf_counter()
            end = self.ended_at or perf_counter()
            return PipelineStats(
                stages=[stage.snapshot(started) for stage in self.stages],
                elapsed_seconds=end - started,
                consumer_wait_seconds=self._consumer_wait(end),
                items_consumed=self.items_consumed,
                timeline=list(self.timeline),
            )

    def _record_sample(self) -> None:
        """Append one timeline sample. Under the lock."""
        now = perf_counter()
        self.timeline.append(
            {
                "time": now - (self.started_at or now),
                "items_out": [stage.items_out for stage in self.stages],
                "queue_length": [len(stage.output.items) for stage in self.stages],
                "busy_seconds": [stage.busy_seconds(now) for stage in self.stages],
                "consumer_wait": self._consumer_wait(now),
            }
        )

    def _sample(self) -> None:
        if self.stopping:
            return
        with self.lock:
            self._record_sample()
            now = perf_counter()
        if self._report_interval is not None and now - self._last_report >= self._report_interval:
            self._last_report = now
            _logger.info("pipeline %s:\n%s", self.name, Lines(self.stats().format_table()))
        with self.lock:
            monitors = list(self.monitors)
        for monitor in monitors:
            try:
                monitor()
            except Exception:  # a monitor's bug must not stop the pipeline: it is dropped, loudly
                _logger.exception("pipeline %s: monitor %r raised; it is removed", self.name, monitor)
                with self.lock:
                    if monitor in self.monitors:  # not if stop() let go of them meanwhile
                        self.monitors.remove(monitor)
        assert self._loop is not None
        self._loop.call_later(self._sample_interval, self._sample)
