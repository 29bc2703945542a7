"""Bottleneck diagnosis in plain words, from per-stage stats, the data-wait meter and CPU use.

A pipeline is a chain: its throughput is its weakest link's. For every stage we know how many
items per second it could deliver with all its task slots busy (concurrency / mean task time) and
how many it delivered; the stage closest to its capacity is the bottleneck. Then the *kind* of
bottleneck decides the knob: slots all busy while the CPU idles means the stage waits on
latency (raise its concurrency); the CPU at its limit means the stage is CPU-bound (concurrency
will not help; do less work or add cores); a training loop that hardly waits means the loader is
ahead (the model is the bottleneck, nothing to tune here). With a GIL, a stage whose tasks take
turns on it (several running, about one core busy between them, the process no busier) is held by
the GIL, and the verdict says so; a free-threaded build has no GIL to name.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .. import _interpreter
from ..pipeline import PipelineStats, StageStats
from ._contention import Contention
from ._meter import DataWaitReport

__all__ = ["Diagnosis", "StageState", "diagnose"]

# Share of wall time the consumer may wait before data is called the bottleneck.
_LOOP_WAIT_THRESHOLD = 0.10
# Share of all cores in use that counts as the machine being saturated.
_CPU_SATURATED = 0.85
# Share of its running time a stage's tasks spend on the CPU for the stage to count as
# computing rather than waiting (I/O, sleeps, remote calls stay near 0; decoding near 1).
_COMPUTING = 0.6
# Share of its task slots a stage must keep busy to be called saturated.
_SATURATED_SLOTS = 0.8


@dataclass(frozen=True)
class StageState:
    """One stage in the terms the verdict uses, all shares in 0..1.

    Attributes:
        name: The stage.
        kind: ``source`` or ``pipe``.
        concurrency: Task slots.
        utilization: Share of its slots busy on average (busy tasks / concurrency): how close
            the stage runs to its capacity.
        compute_share: Share of its tasks' running time spent on the CPU (None: not measured).
        wait_input: Share of the run with a free slot and nothing to take (upstream is slower).
        wait_output: Share of the run with results ready and no room downstream.
    """

    name: str
    kind: str
    concurrency: int
    utilization: float
    compute_share: float | None
    wait_input: float
    wait_output: float

    @classmethod
    def of(cls, stage: StageStats, elapsed: float) -> StageState:
        total = stage.task_time.total
        return cls(
            name=stage.name,
            kind=str(stage.kind),
            concurrency=stage.concurrency,
            utilization=min(1.0, stage.busy_tasks_mean / stage.concurrency) if stage.concurrency else 0.0,
            # Only sync ops report thread CPU time; zero CPU over real work means "not measured".
            compute_share=min(1.0, stage.task_cpu_seconds / total) if total > 0 and stage.task_cpu_seconds > 0 else None,
            wait_input=stage.wait_input_seconds / elapsed,
            wait_output=stage.wait_output_seconds / elapsed,
        )


@dataclass(frozen=True)
class Diagnosis:
    """The verdict: which stage, what kind of limit, the knob, and the evidence.

    Attributes:
        bottleneck: The stage name, or ``"training loop"`` when the loader keeps up.
        kind: ``"cpu"``, ``"gil"`` (Python code taking turns on the interpreter's lock),
            ``"contention"``, ``"latency"``, ``"starved"`` or ``"compute"``.
        message: One or two sentences for a person.
        facts: Supporting numbers (per-stage state, waits, CPU, storage facts).
    """

    bottleneck: str
    kind: str
    message: str
    facts: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def diagnose(
    stats: PipelineStats,
    *,
    cpu_fraction: float | None = None,
    cores: int = 1,
    meter: DataWaitReport | None = None,
    storage_facts: dict[str, Any] | None = None,
    training_step: bool = True,
    contention: Contention | None = None,
) -> Diagnosis:
    """Name the bottleneck of a finished (or running) pipeline: exactly one verdict, from one
    model of each stage (`StageState`) and of the machine.

    1. With a training step, a loop that waits for data less than 10% of the time is
       compute-bound: the loader keeps up. Without one (the loader measured alone), the loop can
       never be the bottleneck: the loader's slowest stage is named.
    2. Otherwise the stage running closest to its capacity (the highest share of busy slots) is
       the bottleneck. If the kernel says the process's threads waited long to run and why
       (``contention``: other processes on the cores, a CPU quota, an affinity mask), that is
       the verdict: the stage is short of CPU, and more concurrency would only queue. Otherwise
       its kind decides the knob: its tasks mostly computing (or the
       machine's cores saturated) is CPU-bound, with advice that depends on whether cores are
       free; its slots full while it waits is latency-bound (raise concurrency); neither is
       starved (look upstream or at output order).

    Args:
        stats: The pipeline's stats.
        cpu_fraction: Process CPU time / (wall time x cores), 0..1, if measured.
        cores: Cores available.
        meter: The training loop's data-wait report, if it was metered.
        storage_facts: ``bytes_read`` and ``bytes_delivered`` (and any other facts to report).
        training_step: Whether the consumer does work of its own between batches.
        contention: What the kernel says of the run's CPU (`Contention.between` two snapshots).
    """
    elapsed = max(stats.elapsed_seconds, 1e-9)
    wait_fraction = meter.wait_fraction if meter is not None and meter.steps else stats.consumer_wait_seconds / elapsed
    states = [StageState.of(stage, elapsed) for stage in stats.stages if stage.kind in ("source", "pipe") and stage.task_time.count > 0]
    facts: dict[str, Any] = {
        "data_wait_fraction": wait_fraction,
        "cpu_fraction": cpu_fraction,
        "cores": cores,
        "training_step": training_step,
        "stages": {state.name: asdict(state) for state in states},
        **(storage_facts or {}),
    }
    notes = _notes(stats, storage_facts, facts)
    if not states or (training_step and wait_fraction < _LOOP_WAIT_THRESHOLD):
        return Diagnosis(
            "training loop",
            "compute",
            f"compute-bound: the training loop waited for data only {100 * wait_fraction:.0f}% of the time; the loader keeps up, "
            f"so speed comes from the model side.{notes}",
            facts,
        )
    bottleneck = max(states, key=lambda state: state.utilization)
    facts["bottleneck"] = asdict(bottleneck)
    if contention is not None:
        facts["contention"] = asdict(contention)
        explained = contention.explanation()
        if explained is not None:
            loop = f" The training loop waits for data {100 * wait_fraction:.0f}% of the time." if training_step else ""
            cores = max(1, int(contention.limits.usable + 0.5))
            if not contention.from_other_processes:
                advice = (
                    f"More threads would only queue for the same cores: keep {bottleneck.name} concurrency at most {cores}, and free "
                    "cores (or raise the limit) to go faster."
                )
            elif training_step and wait_fraction < _LOOP_WAIT_THRESHOLD:
                advice = (
                    f"The loop has data enough, so {bottleneck.name} needs no more than {cores} thread(s): more would take cores from "
                    "the other processes (perhaps this job's own trainer) for nothing."
                )
            else:
                advice = (
                    "The cores are shared out by thread, so more threads win this job a larger share of them, at the other processes' "
                    f"expense (the live tuner does this while the loop waits for data, up to {4 * cores} threads); to go faster "
                    "without taking from them, free cores."
                )
            return Diagnosis(
                bottleneck.name,
                "contention",
                f"{bottleneck.name} is short of CPU, not of concurrency: {explained}. {advice}{loop}{notes}",
                facts,
            )
    return _verdict(bottleneck, states, cpu_fraction, cores, wait_fraction, training_step, notes, facts)


def _verdict(
    stage: StageState,
    states: list[StageState],
    cpu_fraction: float | None,
    cores: int,
    wait_fraction: float,
    training_step: bool,
    notes: str,
    facts: dict[str, Any],
) -> Diagnosis:
    busy = stage.utilization * stage.concurrency
    waiting = [other.name for other in states if other is not stage and other.wait_input > 0.2]
    after = f"; {', '.join(waiting)} wait{'s' if len(waiting) == 1 else ''} for its output" if waiting else ""
    loop = f" The training loop waits for data {100 * wait_fraction:.0f}% of the time." if training_step else ""
    cpu = f"the process uses {100 * cpu_fraction:.0f}% of {cores} cores" if cpu_fraction is not None else f"{cores} cores"
    saturated = cpu_fraction is not None and cpu_fraction >= _CPU_SATURATED
    computing = stage.compute_share is not None and stage.compute_share >= _COMPUTING
    share = f"its tasks spend {100 * (stage.compute_share or 0):.0f}% of their time on the CPU"
    process_cores = cpu_fraction * cores if cpu_fraction is not None else None
    if cores >= 2 and _interpreter.held_by_the_gil(busy, busy * (stage.compute_share or 0), process_cores):
        return Diagnosis(
            stage.name,
            "gil",
            f"{stage.name} is held by the GIL: {busy:.1f} of {stage.concurrency} slots busy, yet together its tasks keep only "
            f"{busy * (stage.compute_share or 0):.1f} core busy ({share}) and {cpu}{after}: its Python code runs one thread at "
            f"a time. More concurrency will not help: do the work in an op that releases the GIL (stoker.ops, numpy, Pillow), "
            f"run it in a process pool (pipe(executor=ProcessPoolExecutor())), or use a free-threaded Python (3.14t).{loop}{notes}",
            facts,
        )
    if computing and not saturated and stage.concurrency < cores:
        return Diagnosis(
            stage.name,
            "cpu",
            f"{stage.name} is CPU-bound with cores to spare: {share}, {busy:.1f} of {stage.concurrency} slots busy, and {cpu}"
            f"{after}. Raise {stage.name} concurrency to {cores} (one task per core).{loop}{notes}",
            facts,
        )
    if computing or saturated:
        return Diagnosis(
            stage.name,
            "cpu",
            f"{stage.name} is CPU-bound: {share}, and {cpu}{after}. More concurrency will not help: do less work per sample "
            f"(smaller images, a cheaper transform) or add cores.{loop}{notes}",
            facts,
        )
    if stage.utilization >= _SATURATED_SLOTS and stage.kind == "source":
        # A source that waits: for a Loader over network storage, the per-sample prefetcher,
        # whose depth is the batches of requests in flight.
        return Diagnosis(
            stage.name,
            "latency",
            f"{stage.name} (the source) is latency-bound: it waits on I/O while {cpu}{after}; read further ahead (a Loader over "
            f"network storage: raise fetch_concurrency, the batches of requests in flight, or the storage's max_in_flight).{loop}{notes}",
            facts,
        )
    if stage.utilization >= _SATURATED_SLOTS:
        return Diagnosis(
            stage.name,
            "latency",
            f"{stage.name} is latency-bound: {busy:.1f} of {stage.concurrency} slots busy while its tasks wait (on the CPU "
            f"{100 * (stage.compute_share or 0):.0f}% of their time) and {cpu}{after}; raise {stage.name} concurrency "
            f"(try {2 * stage.concurrency}).{loop}{notes}",
            facts,
        )
    return Diagnosis(
        stage.name,
        "starved",
        f"{stage.name} runs closest to its capacity, yet only {busy:.1f} of its {stage.concurrency} slots are busy: the loader is "
        f"held back before it or by output order (a slow item holding back the rest); look upstream, or allow out-of-order "
        f"output.{loop}{notes}",
        facts,
    )


def _notes(stats: PipelineStats, storage_facts: dict[str, Any] | None, facts: dict[str, Any]) -> str:
    """The storage and bad-sample sentences appended to every verdict."""
    notes = ""
    if storage_facts and "bytes_read" in storage_facts and "bytes_delivered" in storage_facts:
        notes += (
            f" Storage: read {storage_facts['bytes_read'] / 1e6:,.0f} MB from storage to deliver "
            f"{storage_facts['bytes_delivered'] / 1e6:,.0f} MB of decoded batches."
        )
    if stats.sample_failures:
        facts["sample_failures"] = dict(stats.sample_failures)
        listed = ", ".join(f"{kind} {count}" for kind, count in sorted(stats.sample_failures.items()))
        notes += f" Bad samples: {sum(stats.sample_failures.values())} ({listed}); the Loader lists them in loader.failures."
    return notes
