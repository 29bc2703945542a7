"""The training loop's data-wait meter (Data Journey's diagnostic): how much of each step is spent
waiting for the next batch, and whether the loop is data-bound or compute-bound."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from time import perf_counter
from typing import Generic, TypeVar

__all__ = ["DataWaitMeter", "DataWaitReport"]

T = TypeVar("T")

# Above this share of step time spent waiting for data, the loop is data-bound.
DATA_BOUND_THRESHOLD = 0.10


@dataclass(frozen=True)
class DataWaitReport:
    """Totals since the meter started."""

    steps: int
    wait_seconds: float
    compute_seconds: float

    @property
    def wait_fraction(self) -> float:
        """Share of step time spent waiting for data (0..1)."""
        total = self.wait_seconds + self.compute_seconds
        return self.wait_seconds / total if total > 0 else 0.0

    @property
    def steps_per_second(self) -> float:
        total = self.wait_seconds + self.compute_seconds
        return self.steps / total if total > 0 else 0.0

    @property
    def verdict(self) -> str:
        """One line: data-bound or compute-bound, with the numbers."""
        share = 100 * self.wait_fraction
        if self.wait_fraction > DATA_BOUND_THRESHOLD:
            return f"data-bound: the loop waits for data {share:.0f}% of each step ({self.steps_per_second:.1f} steps/s); feed it faster"
        return f"compute-bound: data wait is {share:.0f}% of each step ({self.steps_per_second:.1f} steps/s); the loader keeps up"


class DataWaitMeter(Generic[T]):
    """Wrap the iterator a training loop consumes: ``for batch in DataWaitMeter(loader): step()``.

    Time inside ``next()`` is data wait; time between one ``next()`` returning and the next call
    is compute. The first batch's wait is counted apart (start-up, not steady state). Iterating
    the meter again (the next epoch) adds to the same totals.

    When an iteration ends (exhausted, ``break``, an exception) the meter prints its one-line
    verdict to stderr, e.g. ``data wait: data-bound: the loop waits for data 63% of each step
    (41.2 steps/s); feed it faster``; ``verbose=False`` keeps it quiet (`report` has it all).
    """

    def __init__(self, iterable: Iterable[T], *, verbose: bool = True) -> None:
        self._iterable = iterable
        self.verbose = verbose
        # The training loop's thread adds to the figures; `report` may be read from another (a
        # logging or checkpoint thread): `_lock` keeps a step's figures whole together.
        self._lock = threading.Lock()
        self.steps = 0
        self.wait_seconds = 0.0
        self.compute_seconds = 0.0
        self.first_batch_seconds: float | None = None

    def __iter__(self) -> Iterator[T]:
        iterator = iter(self._iterable)
        last_return: float | None = None
        started = perf_counter()
        try:
            while True:
                asked = perf_counter()
                if last_return is not None:
                    with self._lock:
                        self.compute_seconds += asked - last_return
                try:
                    item = next(iterator)
                except StopIteration:
                    return
                last_return = perf_counter()
                with self._lock:
                    if self.first_batch_seconds is None:
                        self.first_batch_seconds = last_return - started
                    else:
                        self.wait_seconds += last_return - asked
                    self.steps += 1
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Print the verdict so far (once per iteration; nothing before the first step)."""
        if self.verbose and self.steps:
            print(f"data wait: {self.report().verdict}", file=sys.stderr, flush=True)

    def report(self) -> DataWaitReport:
        """The totals so far, taken whole (any thread may ask)."""
        with self._lock:
            return DataWaitReport(self.steps, self.wait_seconds, self.compute_seconds)
