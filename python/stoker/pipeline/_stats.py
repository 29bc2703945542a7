"""Per-stage statistics: what each stage did, how long its tasks took, and how long it waited.

The engine updates these under its lock at every event, so reading them is cheap and consistent.
They are what the bottleneck diagnosis reads: a stage that waits on its input is starved by
upstream; a stage that waits on its output is held back by downstream; a stage that does neither
with every slot busy is the bottleneck.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["PipelineStats", "StageStats", "TaskTimeSummary", "TuningDecision"]

# Task times are kept in a log-scale histogram: bounded memory whatever the run length, and
# quantiles within about 2.5% of the truth (each bucket spans 5%).
_BUCKET_RATIO = 1.05
_SMALLEST_SECONDS = 1e-7
_BUCKET_COUNT = int(math.log(1e4 / _SMALLEST_SECONDS) / math.log(_BUCKET_RATIO)) + 2
_LOG_RATIO = math.log(_BUCKET_RATIO)


class _TaskTimeHistogram:
    """Counts of task durations in geometric buckets, plus an exact sum and maximum."""

    __slots__ = ("counts", "total", "count", "maximum")

    def __init__(self) -> None:
        self.counts = [0] * _BUCKET_COUNT
        self.total = 0.0
        self.count = 0
        self.maximum = 0.0

    def record(self, seconds: float) -> None:
        if seconds <= _SMALLEST_SECONDS:
            bucket = 0
        else:
            bucket = min(int(math.log(seconds / _SMALLEST_SECONDS) / _LOG_RATIO) + 1, _BUCKET_COUNT - 1)
        self.counts[bucket] += 1
        self.total += seconds
        self.count += 1
        if seconds > self.maximum:
            self.maximum = seconds

    def quantile(self, fraction: float) -> float:
        if self.count == 0:
            return 0.0
        rank = fraction * (self.count - 1)
        seen = 0
        for bucket, bucket_count in enumerate(self.counts):
            seen += bucket_count
            if seen > rank:
                if bucket == 0:
                    return _SMALLEST_SECONDS
                # The geometric middle of the bucket, capped by the largest value seen.
                middle = _SMALLEST_SECONDS * _BUCKET_RATIO ** (bucket - 0.5)
                return min(middle, self.maximum)
        return self.maximum

    def summary(self) -> TaskTimeSummary:
        mean = self.total / self.count if self.count else 0.0
        return TaskTimeSummary(
            count=self.count,
            mean=mean,
            p50=self.quantile(0.50),
            p90=self.quantile(0.90),
            p99=self.quantile(0.99),
            maximum=self.maximum,
            total=self.total,
        )


@dataclass(frozen=True)
class TaskTimeSummary:
    """Durations of a stage's tasks, in seconds."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    maximum: float
    total: float


@dataclass(frozen=True)
class StageStats:
    """A snapshot of one stage.

    Attributes:
        name: The stage's name.
        kind: ``source``, ``pipe``, ``aggregate``, ``disaggregate`` or ``sink``.
        concurrency: Tasks the stage may run at once.
        items_in: Items taken from the input queue (for a source: items produced).
        items_out: Items put into the output queue.
        failures: Items the op raised on (dropped).
        task_time: Durations of the op's calls.
        task_cpu_seconds: CPU time the op's calls used in their threads (sync ops only): close
            to ``task_time.total`` for CPU-bound work, near zero for work that waits.
        busy_tasks_mean: Mean number of tasks running, over the stage's lifetime.
        wait_input_seconds: Time with a free task slot and nothing to take: upstream is slower.
        wait_output_seconds: Time with work ready but the output queue full: downstream is slower.
        queue_capacity: Size of the output queue.
        queue_length: Items in the output queue now.
        queue_length_mean: Time-weighted mean length of the output queue.
        elapsed_seconds: Seconds since the pipeline started (or its total run time once ended).
    """

    name: str
    kind: str
    concurrency: int
    items_in: int
    items_out: int
    failures: int
    task_time: TaskTimeSummary
    task_cpu_seconds: float
    busy_tasks_mean: float
    wait_input_seconds: float
    wait_output_seconds: float
    queue_capacity: int
    queue_length: int
    queue_length_mean: float
    elapsed_seconds: float

    @property
    def throughput(self) -> float:
        """Items put out per second over the stage's lifetime."""
        return self.items_out / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0


@dataclass(frozen=True)
class TuningDecision:
    """One move of the tuner.

    Attributes:
        seconds: When, in seconds since tuning began (the first epoch's start, for a Loader).
        knob: What changed (``"decode concurrency"``, ``"prefetch"``...).
        old: The value before.
        new: The value after.
        reason: Why, in words, with the figures that decided it.
    """

    seconds: float
    knob: str
    old: int
    new: int
    reason: str

    def describe(self) -> str:
        """One line: ``at 3.2 s: decode concurrency 2 -> 3 (reason)``."""
        return f"at {self.seconds:.1f} s: {self.knob} {self.old} -> {self.new} ({self.reason})"


@dataclass(frozen=True)
class PipelineStats:
    """A snapshot of every stage, source first, plus the sampled timeline.

    Attributes:
        stages: One entry per stage, in pipeline order.
        elapsed_seconds: Seconds since the pipeline started.
        consumer_wait_seconds: Time the consumer spent waiting for the next item (a wait in
            progress included: a loop waiting for its first item has not been fed).
        items_consumed: Items the consumer took.
        timeline: Periodic samples ``{"time", "items_out": [...], "queue_length": [...],
            "busy_seconds": [...], "consumer_wait"}``, one list entry per stage (cumulative
            counts, task-seconds and consumer wait), for plots of throughput, how busy each
            stage is, and the consumer's data wait over time.
        sample_failures: Bad samples by stage and what was done, as a user of the pipeline
            (the Loader) counted them, e.g. ``{"decode: replaced": 2}``.
        tuning: The live tuner's moves, oldest first (`TuningDecision`), where one runs.
        storage: What reading the storage took in this epoch, as the pipeline's user (the
            Loader) counted it on network storage: ``requests`` by kind, ``bytes_read``,
            ``cache_bytes`` by cache level, ``retries``, and ``cost`` (``dollars``, ``prices``,
            ``as_of``) at the chosen price table.
    """

    stages: list[StageStats]
    elapsed_seconds: float
    consumer_wait_seconds: float
    items_consumed: int
    timeline: list[dict[str, Any]] = field(default_factory=list)
    sample_failures: dict[str, int] = field(default_factory=dict)
    tuning: list[TuningDecision] = field(default_factory=list)
    storage: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (dicts, lists, numbers, strings), ready for ``json.dumps``."""
        return asdict(self)

    def format_table(self) -> str:
        """A fixed-width table, one line per stage, for logs and the end-of-run report."""
        header = (
            f"{'stage':<18} {'conc':>4} {'in':>8} {'out':>8} {'fail':>5} {'items/s':>9} "
            f"{'mean ms':>8} {'p50 ms':>7} {'p99 ms':>7} {'busy':>5} {'wait in':>8} {'wait out':>8} {'queue':>9}"
        )
        lines = [header, "-" * len(header)]
        for stage in self.stages:
            time = stage.task_time
            lines.append(
                f"{stage.name[:18]:<18} {stage.concurrency:>4} {stage.items_in:>8} {stage.items_out:>8} "
                f"{stage.failures:>5} {stage.throughput:>9.1f} {time.mean * 1e3:>8.3f} {time.p50 * 1e3:>7.3f} "
                f"{time.p99 * 1e3:>7.3f} {stage.busy_tasks_mean:>5.2f} {stage.wait_input_seconds:>7.2f}s "
                f"{stage.wait_output_seconds:>7.2f}s {stage.queue_length_mean:>4.1f}/{stage.queue_capacity:<4}"
            )
        lines.append(
            f"consumer: {self.items_consumed} items in {self.elapsed_seconds:.2f}s, waited {self.consumer_wait_seconds:.2f}s for data"
        )
        if self.tuning:
            lines.append(f"tuned live ({len(self.tuning)} moves), last: " + "; ".join(move.describe() for move in self.tuning[-3:]))
        if self.storage:
            requests = ", ".join(f"{count:,} {kind}" for kind, count in sorted(self.storage["requests"].items())) or "no requests"
            cost = self.storage.get("cost")
            priced = f"; about ${cost['dollars']:,.4f} at {cost['prices']} list prices ({cost['as_of']})" if cost else ""
            lines.append(f"storage: {requests}; {self.storage['bytes_read'] / 1e6:,.1f} MB read{priced}")
        if self.sample_failures:
            lines.append("bad samples: " + ", ".join(f"{kind} {count}" for kind, count in sorted(self.sample_failures.items())))
        return "\n".join(lines)
