"""What the engine needs of every stage, whichever kind: one typed surface for `_Stage` (sources
and pipes, run by tasks on threads or the event loop) and `_InlineStage` (aggregate and
disaggregate, run inside the engine's lock)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._buffer import _Buffer
    from ._errors import FailureRecord
    from ._spec import StageSpec
    from ._stats import StageStats

__all__ = ["StageRunner"]


class StageRunner(Protocol):
    """A stage as the engine sees it."""

    spec: StageSpec
    name: str
    output: _Buffer
    items_out: int
    failure_count: int
    failure_records: list[FailureRecord]
    wake_pending: bool

    def busy_seconds(self, now: float) -> float:
        """Task-seconds run so far."""
        ...

    def snapshot(self, started: float) -> StageStats:
        """The stage's stats so far, measured from ``started``."""
        ...
