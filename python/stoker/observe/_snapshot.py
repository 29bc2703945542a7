"""What a Loader shows of itself while it runs: one read-only `LiveSnapshot`, taken by
`snapshot()`, which the metrics endpoint, `stoker bench` and reports read instead of reaching into
the Loader's own fields (so the Loader can change inside without breaking them), and the
`RunTotals` of the epochs it finished."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..pipeline import PipelineStats, StageStats

__all__ = ["LiveSnapshot", "RunTotals", "Snapshotting"]


@dataclass
class RunTotals:
    """Counts of the epochs a Loader finished, so counters keep growing across epochs."""

    batches: int = 0
    seconds: float = 0.0
    wait_seconds: float = 0.0
    stage_items: Counter[str] = field(default_factory=Counter)
    stage_busy_seconds: dict[str, float] = field(default_factory=dict)
    stage_failures: Counter[str] = field(default_factory=Counter)

    def add(self, stats: PipelineStats) -> None:
        """Count a finished epoch's final stats."""
        self.batches += stats.items_consumed
        self.seconds += stats.elapsed_seconds
        self.wait_seconds += stats.consumer_wait_seconds
        for stage in stats.stages:
            self.stage_items[stage.name] += stage.items_out
            self.stage_busy_seconds[stage.name] = (
                self.stage_busy_seconds.get(stage.name, 0.0) + stage.busy_tasks_mean * stage.elapsed_seconds
            )
            self.stage_failures[stage.name] += stage.failures

    def copy(self) -> RunTotals:
        """A copy that later epochs do not change (what a `LiveSnapshot` holds)."""
        return RunTotals(
            self.batches,
            self.seconds,
            self.wait_seconds,
            Counter(self.stage_items),
            dict(self.stage_busy_seconds),
            Counter(self.stage_failures),
        )


@dataclass(frozen=True)
class LiveSnapshot:
    """A Loader at one moment.

    Attributes:
        rank: This process's rank.
        step: Batches this rank delivered since the run began (carried across resumes).
        totals: The finished epochs' counts (a copy).
        running: The running epoch's pipeline stats; None between epochs.
        stages: The running epoch's stages, or the last epoch's between epochs.
        bad_samples: Bad samples met in the run, by ``"stage: action"`` (e.g.
            ``"decode: replaced"``).
        tuning_moves: The live tuner's moves in the run, by knob.
    """

    rank: int
    step: int
    totals: RunTotals
    running: PipelineStats | None
    stages: tuple[StageStats, ...]
    bad_samples: Mapping[str, int]
    tuning_moves: Mapping[str, int]

    @property
    def run_seconds(self) -> float:
        """Seconds the Loader's epochs ran, the running one included."""
        return self.totals.seconds + (self.running.elapsed_seconds if self.running else 0.0)

    @property
    def wait_seconds(self) -> float:
        """Seconds the training loop waited for the Loader, the running epoch included."""
        return self.totals.wait_seconds + (self.running.consumer_wait_seconds if self.running else 0.0)

    def stage_totals(self) -> dict[str, tuple[int, float]]:
        """Each stage's items put out and task-seconds run since the run began (finished epochs
        and the running one): counters that only grow, for rates between two snapshots."""
        found = {}
        for stage in self.stages:
            now = [stage] if self.running is not None else []
            found[stage.name] = (
                self.totals.stage_items[stage.name] + sum(each.items_out for each in now),
                self.totals.stage_busy_seconds.get(stage.name, 0.0) + sum(each.busy_tasks_mean * each.elapsed_seconds for each in now),
            )
        return found


class Snapshotting(Protocol):
    """Anything that can show itself as a `LiveSnapshot` (the Loader)."""

    def snapshot(self) -> LiveSnapshot:
        """The figures now."""
        ...
