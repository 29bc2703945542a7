"""The bounded queue between two stages.

A buffer holds finished items plus *reservations*: a task takes a reservation before it starts
(or before a generator takes its next step), so a finished result always has a slot and a task
never has to block a thread waiting for room. That is what lets every task run in a shared
thread pool without deadlock, however small the pool: when downstream is slow, upstream simply
stops starting tasks, and the congestion reaches the source (backpressure).

Not thread-safe by itself: the engine's lock guards every call. `StageRunner` is what a buffer
knows of the stages at its two ends.
"""

from __future__ import annotations

from collections import deque
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ..failures import Failure
    from ._spec import StageSpec
    from ._stats import StageStats


class _Buffer:
    """Items between a producing stage and its consumer (the next stage or the user).

    Attributes:
        capacity: Finished items plus reservations the buffer may hold.
        items: Finished items, oldest first.
        reserved: Slots promised to tasks still running.
        closed: The producer will put nothing more.
        producer: The stage that fills the buffer.
        consumer: The stage that drains it, or ``None`` for the pipeline's user.
    """

    __slots__ = (
        "capacity",
        "items",
        "reserved",
        "closed",
        "producer",
        "consumer",
        "_area",
        "_last_change",
    )

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ConfigurationError(f"buffer capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.items: deque[Any] = deque()
        self.reserved = 0
        self.closed = False
        self.producer: StageRunner | None = None  # the stage that fills it
        self.consumer: StageRunner | None = None  # the stage that takes from it (None: the sink)
        self._area = 0.0
        self._last_change = perf_counter()

    def start_clock(self, at: float) -> None:
        """Measure the mean length from ``at`` (the pipeline's start) on."""
        self._area = 0.0
        self._last_change = at

    def can_reserve(self) -> bool:
        """Whether one more slot can be promised."""
        return len(self.items) + self.reserved < self.capacity

    def has_room(self) -> bool:
        """Whether a finished item fits, counting finished items only."""
        return len(self.items) < self.capacity

    def push(self, item: Any) -> None:
        self._account()
        self.items.append(item)

    def pop(self) -> Any:
        self._account()
        return self.items.popleft()

    def _account(self) -> None:
        now = perf_counter()
        self._area += len(self.items) * (now - self._last_change)
        self._last_change = now

    def mean_length(self, since: float) -> float:
        """Time-weighted mean number of finished items held since ``since``."""
        now = perf_counter()
        area = self._area + len(self.items) * (now - self._last_change)
        return area / (now - since) if now > since else float(len(self.items))


class StageRunner(Protocol):
    """A stage as the engine and its buffers see it, whichever kind: `_Stage` (sources and pipes,
    run by tasks on threads or the event loop) or `_InlineStage` (aggregate and disaggregate, run
    inside the engine's lock)."""

    spec: StageSpec
    name: str
    output: _Buffer
    items_out: int
    failure_count: int
    failure_records: list[Failure]
    wake_pending: bool

    def busy_seconds(self, now: float) -> float:
        """Task-seconds run so far."""
        ...

    def snapshot(self, started: float) -> StageStats:
        """The stage's stats so far, measured from ``started``."""
        ...
