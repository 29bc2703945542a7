"""Sets of non-negative integers kept as sorted, disjoint [start, end) ranges: what was delivered.

Delivery is nearly in order even when out of order (a few batches overtake others), so a
delivery record kept in the coordinates where it is contiguous (a rank's own plan slots, see
`EpochPlan`) stays a handful of ranges however large the epoch: a checkpoint is small and plain
data. Every operation here costs in the number of ranges and of the values passed, never in the
number of members: adding a batch to a set holding a billion positions costs what adding it to
an empty one does (the old set expanded every member into an array at every compaction, which
made an epoch quadratic).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

__all__ = ["PositionSet", "runs"]

# Values added are buffered and merged into the ranges this many at a time.
_PENDING = 4096


def runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs of consecutive values in ``values`` (sorted and unique here)."""
    values = np.unique(np.asarray(values, dtype=np.int64))
    if values.size == 0:
        return values, values
    breaks = np.flatnonzero(np.diff(values) != 1)
    starts = np.concatenate([values[:1], values[breaks + 1]])
    ends = np.concatenate([values[breaks], values[-1:]]) + 1
    return starts, ends


def _coalesced(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Any [start, end) intervals as sorted, disjoint, non-adjacent ranges (empty ones dropped)."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return starts.astype(np.int64), ends.astype(np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    first = np.concatenate([[True], starts[1:] > ends[:-1]])
    last = np.concatenate([first[1:], [True]])
    return starts[first].astype(np.int64), ends[last].astype(np.int64)


def _covered(starts: np.ndarray, ends: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Whether each of ``points`` lies inside one of the (sorted, disjoint) ranges."""
    if starts.size == 0:
        return np.zeros(len(points), dtype=bool)
    at = np.searchsorted(starts, points, side="right") - 1
    return (at >= 0) & (points < ends[np.maximum(at, 0)])


def _combine(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], keep_a: bool, keep_b: bool
) -> tuple[np.ndarray, np.ndarray]:
    """A set operation on two range sets, by a sweep over their boundaries: with ``keep_a`` and
    ``keep_b`` the intersection, with ``keep_a`` alone A less B, with neither the union."""
    points = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    if points.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    left = points[:-1]
    in_a, in_b = _covered(*a, left), _covered(*b, left)
    if keep_a and keep_b:
        keep = in_a & in_b
    elif keep_a:
        keep = in_a & ~in_b
    else:
        keep = in_a | in_b
    return _coalesced(left[keep], points[1:][keep])


class PositionSet:
    """A set of non-negative integers stored as merged ranges. Thread-safe: one thread may add
    while another reads (a checkpoint thread calling ``state_dict`` during training).

    Args:
        ranges: Initial members as (start, end) pairs; they may overlap or touch.
    """

    def __init__(self, ranges: Iterable[tuple[int, int]] | tuple[np.ndarray, np.ndarray] = ()) -> None:
        self._lock = threading.RLock()
        self._pending: list[np.ndarray] = []
        self._pending_count = 0
        if isinstance(ranges, tuple) and len(ranges) == 2 and isinstance(ranges[0], np.ndarray):
            starts, ends = np.asarray(ranges[0], np.int64), np.asarray(ranges[1], np.int64)
        else:
            pairs = np.asarray(list(ranges), dtype=np.int64).reshape(-1, 2)
            starts, ends = pairs[:, 0], pairs[:, 1]
        self._starts, self._ends = _coalesced(starts, ends)

    @classmethod
    def _of(cls, arrays: tuple[np.ndarray, np.ndarray]) -> PositionSet:
        made = cls()
        made._starts, made._ends = arrays
        return made

    def add_many(self, positions: Iterable[int] | np.ndarray) -> None:
        """Add ``positions`` (buffered: merged into the ranges a few thousand at a time)."""
        values = np.asarray(positions if isinstance(positions, np.ndarray) else list(positions), dtype=np.int64).reshape(-1)
        if values.size == 0:
            return
        with self._lock:
            self._pending.append(values)
            self._pending_count += values.size
            if self._pending_count > _PENDING:
                self._compact_locked()

    def add_range(self, start: int, end: int) -> None:
        """Add every integer in [start, end)."""
        with self._lock:
            self._compact_locked()
            self._starts, self._ends = _coalesced(np.append(self._starts, start), np.append(self._ends, end))

    def remove_many(self, positions: Iterable[int] | np.ndarray) -> None:
        """Take ``positions`` out (those not in the set are ignored)."""
        values = np.asarray(positions if isinstance(positions, np.ndarray) else list(positions), dtype=np.int64).reshape(-1)
        if values.size == 0:
            return
        with self._lock:
            self._compact_locked()
            self._starts, self._ends = _combine((self._starts, self._ends), runs(values), keep_a=True, keep_b=False)

    def _compact_locked(self) -> None:
        if not self._pending:
            return
        added = runs(np.concatenate(self._pending))
        self._pending, self._pending_count = [], 0
        self._starts, self._ends = _coalesced(np.concatenate([self._starts, added[0]]), np.concatenate([self._ends, added[1]]))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the ranges, sorted (read-only views of a snapshot)."""
        with self._lock:
            self._compact_locked()
            return self._starts, self._ends

    def ranges(self) -> list[tuple[int, int]]:
        """The set as sorted, disjoint, non-adjacent [start, end) ranges."""
        starts, ends = self.arrays()
        return list(zip(starts.tolist(), ends.tolist()))

    @property
    def range_count(self) -> int:
        """How many ranges hold the set (what its memory and a checkpoint of it grow with)."""
        return len(self.arrays()[0])

    def contains(self, values: np.ndarray) -> np.ndarray:
        """Whether each of ``values`` is a member."""
        starts, ends = self.arrays()
        return _covered(starts, ends, np.asarray(values, np.int64))

    def count_below(self, values: np.ndarray) -> np.ndarray:
        """How many members are smaller than each of ``values``."""
        starts, ends = self.arrays()
        values = np.asarray(values, np.int64)
        if starts.size == 0:  # an empty set (a leave_out of nothing): nothing below anything
            return np.zeros(values.shape, np.int64)
        before = np.concatenate([[0], np.cumsum(ends - starts)])
        at = np.searchsorted(starts, values, side="right")  # ranges starting at or before each value
        partial = np.where(at > 0, np.minimum(values, ends[np.maximum(at - 1, 0)]) - starts[np.maximum(at - 1, 0)], 0)
        return before[np.maximum(at - 1, 0)] * (at > 0) + np.maximum(partial, 0)

    def select_outside(self, ranks: np.ndarray) -> np.ndarray:
        """The ``k``-th (from 0) non-negative integer that is not a member, for each ``k`` of
        ``ranks``: how a plan skips what was delivered without listing what is left."""
        starts, ends = self.arrays()
        ranks = np.asarray(ranks, np.int64)
        if starts.size == 0:
            return ranks
        lengths = ends - starts
        before = np.concatenate([[0], np.cumsum(lengths)])  # members before each range
        free_before = starts - before[:-1]  # non-members before each range's start
        passed = np.searchsorted(free_before, ranks, side="right")  # ranges wholly before the answer
        return ranks + before[passed]

    def mask(self, size: int) -> np.ndarray:
        """A boolean array of ``size``: True at members (costs ``size``: for small sets only)."""
        result = np.zeros(size, dtype=bool)
        for start, end in self.ranges():
            result[start : min(end, size)] = True
        return result

    def __len__(self) -> int:
        starts, ends = self.arrays()
        return int((ends - starts).sum())

    def union(self, other: PositionSet) -> PositionSet:
        return PositionSet._of(_coalesced(*(np.concatenate(pair) for pair in zip(self.arrays(), other.arrays()))))

    def intersection(self, other: PositionSet) -> PositionSet:
        return PositionSet._of(_combine(self.arrays(), other.arrays(), keep_a=True, keep_b=True))

    def difference(self, other: PositionSet) -> PositionSet:
        return PositionSet._of(_combine(self.arrays(), other.arrays(), keep_a=True, keep_b=False))

    def members(self, limit: int) -> np.ndarray:
        """Every member, ascending, as one array.

        Raises:
            ValueError: More than ``limit`` members (the caller's bound on what it expands).
        """
        starts, ends = self.arrays()
        total = int((ends - starts).sum())
        if total > limit:
            raise ValueError(f"{total:,} members, over the {limit:,} this may expand")
        if total == 0:
            return np.zeros(0, np.int64)
        lengths = ends - starts
        offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        return np.arange(total, dtype=np.int64) + offsets
