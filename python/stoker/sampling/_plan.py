"""`BatchPlan`: the one shape a plan takes from the sampler to a batch.

The sampler's plan for the rest of an epoch is a `BatchPlan` (`Sampler.plan_arrays`); a batch's
share of it is a `BatchPlan` too (`BatchPlan.part`), and the batch a Loader delivers carries
the same three arrays (``positions``, ``padding``; ``indices`` give its keys and labels). For
per-sample prefetch, `BatchPlan.requests` shows the plan as the `OutOfOrderPrefetcher` takes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

__all__ = ["BatchPlan", "PlanRequests", "PlannedSample"]


class PlannedSample(NamedTuple):
    """What rides along with a sample's request through the prefetcher: its key and whether it
    only pads this rank to an equal count."""

    key: str
    padding: bool


class BatchPlan(NamedTuple):
    """Samples to read, in order, as three aligned arrays: a whole epoch's plan or one batch's.

    Attributes:
        positions: Each sample's position in the epoch's order (what resume records).
        indices: Each sample's index in the storage.
        padding: Whether a sample only pads this rank to an equal count (never counted as
            delivered).
    """

    positions: np.ndarray
    indices: np.ndarray
    padding: np.ndarray

    @property
    def size(self) -> int:
        """Samples in the plan."""
        return len(self.positions)

    def part(self, start: int, stop: int) -> BatchPlan:
        """Samples ``start`` to ``stop`` of the plan (a batch's share)."""
        return BatchPlan(self.positions[start:stop], self.indices[start:stop], self.padding[start:stop])

    def requests(self, keys: Sequence[str], on_slice: Callable[[int], None] | None = None) -> PlanRequests:
        """The plan as the prefetcher takes it: ``(position, storage index, PlannedSample)`` per
        sample, built a slice at a time (see `PlanRequests`)."""
        return PlanRequests(self, keys, on_slice)


class _Plan(Protocol):
    """What `PlanRequests` reads: a `BatchPlan`, or an `EpochPlan` computed as it is read."""

    @property
    def size(self) -> int: ...

    def part(self, start: int, stop: int) -> BatchPlan: ...


class PlanRequests(Sequence[tuple[int, int, PlannedSample]]):
    """A plan as ``(position, storage index, PlannedSample(key, padding))`` per sample, built per
    slice: a million-sample epoch is never a million tuples at once.

    Args:
        plan: The plan (a `BatchPlan`, or an `EpochPlan`).
        keys: The storage's keys, by index.
        on_slice: Told the end of each slice taken: the prefetcher takes the plan in order, a
            batch at a time, so this is how far requests have got (`BlockLookahead.requested`).
    """

    def __init__(self, plan: _Plan, keys: Sequence[str], on_slice: Callable[[int], None] | None = None) -> None:
        self.plan, self.keys, self.on_slice = plan, keys, on_slice

    def __len__(self) -> int:
        return self.plan.size

    def __getitem__(self, item: Any) -> Any:
        if not isinstance(item, slice):
            return self[item : item + 1][0]
        size = self.plan.size
        start, stop, step = item.indices(size)
        if self.on_slice is not None:
            self.on_slice(stop)
        part = self.plan.part(start, stop)
        positions = part.positions[::step].tolist()
        indices = part.indices[::step].tolist()
        padding = part.padding[::step].tolist()
        return [(position, index, PlannedSample(self.keys[index], pad)) for position, index, pad in zip(positions, indices, padding)]
