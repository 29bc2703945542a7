"""What the live tuner works from: the knobs it may move (`Knob`), the cores as the kernel counts
them (`CpuRoom`), and one window of a pipeline's stats turned into rates and shares (`Window`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ._stats import PipelineStats

__all__ = ["CpuRoom", "Knob", "StageWindow", "Window"]

# A stage whose CPU time is at least this share of its busy time is CPU-bound.
_CPU_BOUND = 0.5


@dataclass(frozen=True)
class CpuRoom:
    """The cores over one window, as the kernel counts them.

    Attributes:
        usable: Cores this process may use (affinity, cgroup quota).
        used: Cores this process kept busy.
        others: Cores other processes kept busy.
        waited: Share of this process's runnable thread time spent waiting for a core.
    """

    usable: float
    used: float
    others: float
    waited: float

    @property
    def free(self) -> float:
        """Cores neither this process nor the others used."""
        return max(0.0, self.usable - self.used - self.others)

    @property
    def contended(self) -> bool:
        """Other processes hold cores and this process's threads wait to run because of it."""
        return self.waited >= 0.2 and self.others >= 0.5


@dataclass
class Knob:
    """One setting the tuner may move.

    Attributes:
        name: What it is, as decisions name it (``"decode concurrency"``).
        kind: ``"threads"`` (tasks of a stage), ``"requests"`` (reads in flight) or ``"memory"``
            (finished items kept ready).
        get: Its value now.
        set: Changes it while the pipeline runs.
        minimum: Least value.
        maximum: Greatest value.
        stage: The stage whose figures say whether it is the bottleneck (threads knobs).
        bytes_each: Memory one unit holds, for the budget (0 when unknown or negligible).
        saturated: For a requests knob: whether the reads are at its cap now.
    """

    name: str
    kind: Literal["threads", "requests", "memory"]
    get: Callable[[], int]
    set: Callable[[int], None]
    minimum: int = 1
    maximum: int = 64
    stage: str | None = None
    bytes_each: Callable[[], float] = lambda: 0.0
    saturated: Callable[[], bool] | None = None


@dataclass(frozen=True)
class StageWindow:
    busy: float  # mean tasks running
    concurrency: int
    cpu_share: float  # CPU seconds over busy seconds (0 for ops on the event loop)

    @property
    def utilization(self) -> float:
        return self.busy / self.concurrency if self.concurrency else 0.0


@dataclass(frozen=True)
class Window:
    """What one window measured (possibly pieced together from the ends of several epochs)."""

    seconds: float
    items: int  # items the consumer took
    wait: float  # share of the window the consumer waited
    stages: dict[str, StageWindow]
    cpu: CpuRoom | None = None

    @property
    def rate(self) -> float:
        """Items consumed per second."""
        return self.items / self.seconds

    def cpu_bound(self, stage: StageWindow) -> bool:
        """Whether the stage's tasks mostly compute. Time spent waiting for a core counts as
        computing: a decode thread that waits to run looks, from its own clock, like one that
        waits on I/O, and more of them would only take turns."""
        waited = self.cpu.waited if self.cpu is not None else 0.0
        return stage.cpu_share / max(0.1, 1.0 - waited) >= _CPU_BOUND

    @classmethod
    def between(cls, before: PipelineStats, after: PipelineStats) -> Window:
        seconds = max(after.elapsed_seconds - before.elapsed_seconds, 1e-9)
        stages = {}
        for old, new in zip(before.stages, after.stages):
            busy = (new.busy_tasks_mean * new.elapsed_seconds - old.busy_tasks_mean * old.elapsed_seconds) / seconds
            cpu_seconds = new.task_cpu_seconds - old.task_cpu_seconds
            stages[new.name] = StageWindow(max(0.0, busy), new.concurrency, cpu_seconds / (busy * seconds) if busy > 0 else 0.0)
        waited = (after.consumer_wait_seconds - before.consumer_wait_seconds) / seconds
        return cls(seconds, after.items_consumed - before.items_consumed, min(1.0, max(0.0, waited)), stages)

    def then(self, later: Window) -> Window:
        """This window and a ``later`` one as one (time-weighted; the later concurrency)."""
        seconds = self.seconds + later.seconds
        stages = {}
        for name, new in later.stages.items():
            old = self.stages.get(name, new)
            busy = (old.busy * self.seconds + new.busy * later.seconds) / seconds
            cpu = old.cpu_share * old.busy * self.seconds + new.cpu_share * new.busy * later.seconds
            stages[name] = StageWindow(busy, new.concurrency, cpu / (busy * seconds) if busy > 0 else 0.0)
        wait = (self.wait * self.seconds + later.wait * later.seconds) / seconds
        return Window(seconds, self.items + later.items, wait, stages)
