"""Bottleneck diagnosis in plain words, from per-stage stats, the data-wait meter and CPU use.

A pipeline is a chain: its throughput is its weakest link's. For every stage we know how many
items per second it could deliver with all its task slots busy (concurrency / mean task time) and
how many it delivered; the stage closest to its capacity is the bottleneck. Then the *kind* of
bottleneck decides the knob: slots all busy while the CPU idles means the stage waits on
latency (raise its concurrency); the CPU at its limit means the stage is CPU-bound (concurrency
will not help; do less work or add cores); a training loop that hardly waits means the loader is
ahead (the model is the bottleneck, nothing to tune here).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..pipeline import PipelineStats, StageStats
from ._meter import DataWaitReport

__all__ = ["Diagnosis", "diagnose"]

# Share of wall time the consumer may wait before data is called the bottleneck.
_LOOP_WAIT_THRESHOLD = 0.10
# Share of all cores in use that counts as CPU-bound.
_CPU_BOUND = 0.85
# Share of a stage's task time spent on its thread's CPU that makes the stage CPU-bound: waiting
# work (I/O, sleeps, remote calls) stays near 0, computing stays well above this even when the
# machine is shared.
_COMPUTE_SHARE = 0.3


@dataclass(frozen=True)
class Diagnosis:
    """The verdict: which stage, what kind of limit, the knob, and the evidence.

    Attributes:
        bottleneck: The stage name, or ``"training loop"`` when the loader keeps up.
        kind: ``"cpu"``, ``"latency"``, ``"starved"`` or ``"compute"``.
        message: One or two sentences for a person.
        facts: Supporting numbers (per-stage capacity and use, waits, CPU, storage facts).
    """

    bottleneck: str
    kind: str
    message: str
    facts: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _capacity(stage: StageStats) -> float:
    mean = stage.task_time.mean
    return stage.concurrency / mean if mean > 0 else float("inf")


def diagnose(
    stats: PipelineStats,
    *,
    cpu_fraction: float | None = None,
    cores: int = 1,
    meter: DataWaitReport | None = None,
    storage_facts: dict[str, Any] | None = None,
) -> Diagnosis:
    """Name the bottleneck of a finished (or running) pipeline.

    Args:
        stats: The pipeline's stats.
        cpu_fraction: Process CPU time / (wall time x cores), 0..1, if measured.
        cores: Cores available.
        meter: The training loop's data-wait report, if it was metered.
        storage_facts: Extra facts to report (bytes read vs used, cache hit rate...).
    """
    elapsed = max(stats.elapsed_seconds, 1e-9)
    wait_fraction = meter.wait_fraction if meter is not None else stats.consumer_wait_seconds / elapsed
    working = [stage for stage in stats.stages if stage.kind in ("source", "pipe") and stage.task_time.count > 0]
    facts: dict[str, Any] = {
        "data_wait_fraction": wait_fraction,
        "cpu_fraction": cpu_fraction,
        "cores": cores,
        "stages": {
            stage.name: {
                "capacity_per_second": _capacity(stage),
                "throughput_per_second": stage.throughput,
                "busy_slots": stage.busy_tasks_mean,
                "concurrency": stage.concurrency,
                "wait_input_fraction": stage.wait_input_seconds / elapsed,
                "wait_output_fraction": stage.wait_output_seconds / elapsed,
            }
            for stage in working
        },
        **(storage_facts or {}),
    }
    storage_line = ""
    if storage_facts and "bytes_read" in storage_facts and "bytes_delivered" in storage_facts:
        storage_line = (
            f" Storage: read {storage_facts['bytes_read'] / 1e6:.0f} MB for {storage_facts['bytes_delivered'] / 1e6:.0f} MB delivered."
        )
    if stats.sample_failures:
        facts["sample_failures"] = dict(stats.sample_failures)
        listed = ", ".join(f"{kind} {count}" for kind, count in sorted(stats.sample_failures.items()))
        storage_line += f" Bad samples: {sum(stats.sample_failures.values())} ({listed}); the Loader lists them in loader.failures."
    if wait_fraction < _LOOP_WAIT_THRESHOLD or not working:
        return Diagnosis(
            "training loop",
            "compute",
            f"compute-bound: the training loop waited for data only {100 * wait_fraction:.0f}% of the time; the loader keeps up, "
            f"so speed comes from the model side.{storage_line}",
            facts,
        )
    # The stage running closest to its capacity (throughput / capacity nearest 1).
    bottleneck = max(working, key=lambda stage: stage.throughput / _capacity(stage) if _capacity(stage) > 0 else 0.0)
    busy, slots = bottleneck.busy_tasks_mean, bottleneck.concurrency
    downstream_waits = [stage for stage in working if stage is not bottleneck and stage.wait_input_seconds / elapsed > 0.2]
    after = (
        f"; {', '.join(stage.name for stage in downstream_waits)} wait{'s' if len(downstream_waits) == 1 else ''} for its output"
        if downstream_waits
        else ""
    )
    loop = f"The training loop waits for data {100 * wait_fraction:.0f}% of the time."
    # CPU-bound when the stage's tasks spend their time computing (their threads' CPU time over
    # their wall time), or when the whole process saturates the cores.
    total = bottleneck.task_time.total
    compute_share = bottleneck.task_cpu_seconds / total if total > 0 else 0.0
    facts["bottleneck_compute_share"] = compute_share
    process_saturated = cpu_fraction is not None and cpu_fraction >= _CPU_BOUND
    if compute_share >= _COMPUTE_SHARE or process_saturated:
        return Diagnosis(
            bottleneck.name,
            "cpu",
            f"{bottleneck.name} is CPU-bound: its tasks compute {100 * compute_share:.0f}% of the time they run, "
            f"{busy:.1f} of {slots} running on {cores} cores (the process uses {100 * (cpu_fraction or 0):.0f}% of them){after}. "
            f"More concurrency will not help: do less work per sample (smaller images, a cheaper transform) or add cores. "
            f"{loop}{storage_line}",
            facts,
        )
    if bottleneck.kind == "source" and compute_share < _COMPUTE_SHARE:
        # A source that waits, not computes: for a Loader over network storage this is the
        # per-sample prefetcher, whose depth is the batches of requests in flight.
        return Diagnosis(
            bottleneck.name,
            "latency",
            f"{bottleneck.name} (the source) is latency-bound: it waits on I/O while the CPU is at "
            f"{100 * (cpu_fraction or 0):.0f}%{after}; read further ahead (a Loader over network storage: raise "
            f"fetch_concurrency, the batches of requests in flight, or the storage's max_in_flight). {loop}{storage_line}",
            facts,
        )
    if busy >= 0.8 * slots:
        return Diagnosis(
            bottleneck.name,
            "latency",
            f"{bottleneck.name} is latency-bound: {busy:.1f} of {slots} tasks in flight on average while the CPU is at "
            f"{100 * (cpu_fraction or 0):.0f}%{after}; raise {bottleneck.name} concurrency (try {2 * slots}). {loop}{storage_line}",
            facts,
        )
    return Diagnosis(
        bottleneck.name,
        "starved",
        f"{bottleneck.name} is the slowest stage but only {busy:.1f} of its {slots} slots are busy: it is starved by the stage "
        f"before it or by output order (a slow item holding back the rest); look upstream or allow out-of-order output. "
        f"{loop}{storage_line}",
        facts,
    )
