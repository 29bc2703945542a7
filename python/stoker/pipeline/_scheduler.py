"""What a stage sees of the engine that runs it: whether it is stopping, when it ended, and a way
to wake a stage that may now run. Stages depend on this, not on the engine, so the engine can
import its stages without a circle."""

from __future__ import annotations

from typing import Protocol

from ._buffer import StageRunner

__all__ = ["Scheduler"]


class Scheduler(Protocol):
    """The engine, as its stages use it."""

    stopping: bool
    """Set once the pipeline is stopping: stages start nothing new."""
    ended_at: float | None
    """``perf_counter()`` when the pipeline ended, or None while it runs."""

    def wake(self, stage: StageRunner | None) -> None:
        """Let ``stage`` (None: the consumer) take its next step once the lock is released."""
        ...
