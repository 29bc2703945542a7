"""Sets of epoch positions kept as sorted, merged [start, end) ranges: what was delivered.

Delivery is nearly in order even when out of order (a few batches overtake others), so the set
of delivered positions stays a handful of ranges however large the epoch; that keeps a
checkpoint small and makes it plain data.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

__all__ = ["PositionSet"]


class PositionSet:
    """A set of non-negative integers stored as merged ranges. Thread-safe: one thread may add
    while another reads (a checkpoint thread calling ``state_dict`` during training)."""

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        self._lock = threading.RLock()
        self._pending: list[int] = []
        self._ranges: list[tuple[int, int]] = []
        for start, end in ranges:
            self._pending.extend(range(int(start), int(end)))
        self._compact()

    def add_many(self, positions: Iterable[int]) -> None:
        values = [int(position) for position in positions]
        with self._lock:
            self._pending.extend(values)
            if len(self._pending) > 4096:
                self._compact()

    def remove_many(self, positions: Iterable[int]) -> None:
        """Take ``positions`` out (those not in the set are ignored)."""
        values = np.asarray([int(position) for position in positions], dtype=np.int64)
        if values.size == 0:
            return
        with self._lock:
            self._compact_locked()
            members = self._expanded()
            self._ranges = []
            self._pending = members[~np.isin(members, values)].tolist()
            self._compact_locked()

    def _compact(self) -> None:
        with self._lock:
            self._compact_locked()

    def _compact_locked(self) -> None:
        if not self._pending:
            return
        values = np.unique(np.concatenate([np.array(self._pending, dtype=np.int64), self._expanded()]))
        self._pending = []
        if values.size == 0:
            self._ranges = []
            return
        breaks = np.nonzero(np.diff(values) != 1)[0]
        starts = np.concatenate([[values[0]], values[breaks + 1]])
        ends = np.concatenate([values[breaks], [values[-1]]]) + 1
        self._ranges = [(int(start), int(end)) for start, end in zip(starts, ends)]

    def _expanded(self) -> np.ndarray:
        if not self._ranges:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.arange(start, end, dtype=np.int64) for start, end in self._ranges])

    def ranges(self) -> list[tuple[int, int]]:
        """The set as sorted, disjoint, non-adjacent [start, end) ranges."""
        with self._lock:
            self._compact_locked()
            return list(self._ranges)

    def mask(self, size: int) -> np.ndarray:
        """A boolean array of ``size``: True at members."""
        result = np.zeros(size, dtype=bool)
        for start, end in self.ranges():
            result[start : min(end, size)] = True
        return result

    def __len__(self) -> int:
        return sum(end - start for start, end in self.ranges())

    def union(self, other: PositionSet) -> PositionSet:
        return PositionSet(self.ranges() + other.ranges())
