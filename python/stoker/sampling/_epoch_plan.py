"""`EpochPlan`: one rank's samples for the rest of an epoch, computed a chunk at a time.

The plan of rank r of W is a list of slots. Take the epoch's positions that no earlier world
delivered (all of them, unless an elastic resume excluded some): rank r's slot j holds the
(r + jW)-th of them, and slots past the rank's share pad it to an equal count with the first
remaining positions (flagged). What this rank delivered is kept as slots, where delivery is
contiguous (a handful of ranges however far into the epoch), and the plan skips them.

Nothing here holds an array per sample: a slot's position, storage index and padding flag are
computed when a batch asks for them (`part`), by rank arithmetic over the range sets and the
order function (`IndexPermutation`, `BlockOrder`), and the last chunk computed is kept so that a
batch at a time costs what a chunk at a time does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ConfigurationError
from ._plan import BatchPlan, PlanRequests
from ._ranges import PositionSet

__all__ = ["EpochPlan"]

# Slots computed at once (and kept) when a part is asked for: about 1 MB of arrays.
CHUNK = 1 << 16


class EpochPlan:
    """This rank's remaining samples of an epoch (see the module notes).

    Args:
        order: Storage indices of epoch positions (vectorized).
        num_samples: Positions in the epoch.
        rank: This rank.
        world_size: Ranks sharing the positions.
        pad: Equal counts by padding (else the uneven tail is left out).
        excluded: Positions delivered by an earlier world (elastic resume), or None.
        delivered: Slots of this plan this rank delivered (padding slots not among them).
        padding_delivered: Padding slots delivered (they come last, and are taken in order).
    """

    def __init__(
        self,
        order: Callable[[np.ndarray], np.ndarray],
        *,
        num_samples: int,
        rank: int,
        world_size: int,
        pad: bool,
        excluded: PositionSet | None,
        delivered: PositionSet,
        padding_delivered: int,
    ) -> None:
        self._order = order
        self._excluded = PositionSet(excluded.arrays()) if excluded is not None else None
        self.remaining = num_samples - (len(excluded) if excluded is not None else 0)
        self.rank, self.world_size = rank, world_size
        per_rank = -(-self.remaining // world_size) if pad else self.remaining // world_size
        self.real_slots = min(per_rank, max(0, -(-(self.remaining - rank) // world_size)))
        self.padding_slots = per_rank - self.real_slots
        self._start(delivered, padding_delivered)

    def _start(self, delivered: PositionSet, padding_delivered: int) -> None:
        """Skip what this rank delivered (its real and padding slots, once ``real_slots`` and
        ``padding_slots`` are known): what every kind of plan does last when it is made."""
        starts, ends = delivered.arrays()
        self._delivered = PositionSet((np.minimum(starts, self.real_slots), np.minimum(ends, self.real_slots)))
        self._real_left = self.real_slots - len(self._delivered)
        self._padding_from = min(padding_delivered, self.padding_slots)
        self.size = self._real_left + self.padding_slots - self._padding_from
        self._lock = threading.Lock()
        self._chunk: tuple[int, BatchPlan] | None = None

    def _positions(self, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions, padding flags) of plan entries ``ks``."""
        real = ks < self._real_left
        slots = self._delivered.select_outside(ks[real])
        remaining_ranks = np.empty(len(ks), np.int64)
        remaining_ranks[real] = self.rank + slots * self.world_size
        if (~real).any():
            padding = self._padding_from + ks[~real] - self._real_left
            remaining_ranks[~real] = padding % max(1, self.remaining)
        positions = self._excluded.select_outside(remaining_ranks) if self._excluded is not None else remaining_ranks
        return positions, ~real

    def _compute(self, start: int, stop: int) -> BatchPlan:
        ks = np.arange(start, stop, dtype=np.int64)
        positions, padding = self._positions(ks)
        return BatchPlan(positions, np.asarray(self._order(positions), np.int64), padding)

    def part(self, start: int, stop: int) -> BatchPlan:
        """Entries ``start`` to ``stop`` of the plan (a batch's share) as arrays."""
        start, stop = max(0, start), min(self.size, stop)
        if stop <= start:
            empty = np.zeros(0, np.int64)
            return BatchPlan(empty, empty, np.zeros(0, bool))
        if stop - start > CHUNK:
            return self._compute(start, stop)
        with self._lock:
            chunk = self._chunk
            if chunk is None or not chunk[0] <= start or stop > chunk[0] + chunk[1].size:
                chunk = (start, self._compute(start, min(self.size, start + CHUNK)))
                self._chunk = chunk
        first, arrays = chunk
        return arrays.part(start - first, stop - first)

    def truncated(self, size: int) -> EpochPlan:
        """The first ``size`` entries of this plan, as a plan."""
        shorter = object.__new__(EpochPlan)
        shorter.__dict__.update(self.__dict__)
        shorter._lock, shorter._chunk = threading.Lock(), None
        shorter.size = max(0, min(size, self.size))
        return shorter

    def slots_of(self, positions: np.ndarray, *, strict: bool = True) -> np.ndarray:
        """The slots of this rank's real ``positions`` (what the delivery record keeps).

        Args:
            positions: Positions of this rank's plan.
            strict: Raise for a position that is not one of this rank's; else leave it out.

        Raises:
            ConfigurationError: With ``strict``, a position that is not one of this rank's (named).
        """
        positions = np.asarray(positions, np.int64)
        ranks = positions - self._excluded.count_below(positions) if self._excluded is not None else positions
        slots, offsets = np.divmod(ranks - self.rank, self.world_size)
        wrong = (offsets != 0) | (slots < 0) | (slots >= self.real_slots)
        if self._excluded is not None:
            wrong |= self._excluded.contains(positions)
        if wrong.any() and strict:
            raise ConfigurationError(
                f"position {int(positions[np.argmax(wrong)])} is not one of rank {self.rank}'s of {self.world_size} this epoch"
            )
        return slots[~wrong]

    def positions_of_slots(self, slots: np.ndarray) -> np.ndarray:
        """The positions of real ``slots`` of this rank (the inverse of `slots_of`)."""
        ranks = self.rank + np.asarray(slots, np.int64) * self.world_size
        return self._excluded.select_outside(ranks) if self._excluded is not None else ranks

    @property
    def positions(self) -> np.ndarray:
        """Every entry's position (costs 8 bytes an entry: for tests and small epochs)."""
        return self.part(0, self.size).positions

    @property
    def indices(self) -> np.ndarray:
        """Every entry's storage index (costs 8 bytes an entry: for tests and small epochs)."""
        return self.part(0, self.size).indices

    @property
    def padding(self) -> np.ndarray:
        """Every entry's padding flag (for tests and small epochs)."""
        return self.part(0, self.size).padding

    def requests(self, keys: Sequence[str], on_slice: Callable[[int], None] | None = None) -> PlanRequests:
        """The plan as the prefetcher takes it, a slice at a time (see `PlanRequests`)."""
        return PlanRequests(self, keys, on_slice)
