"""`WholeBatchPlan`: one rank's rest of a bucketed epoch dealt in whole batches, after a resume
on another world size (or after one, at the same size).

A bucketed epoch (`BucketOrder`) is laid out for the W0 ranks it began on: batch b holds the
positions ``(b // W0) * W0 * B + k * W0 + b % W0`` (k < B), one bucket's samples. A resume on W
ranks cannot deal what is left position by position, as a plain epoch's is (a rank's batch would
mix buckets, and batches of one bucket would be cut up): it deals the batches no earlier world
delivered, whole, in their order: the q-th of them goes to rank q % W as its batch q // W. When
they do not divide evenly, the ranks short of a batch repeat one of the first (flagged as
padding, as a plain epoch's short ranks repeat samples), so every rank takes the same steps and
each sample is read once.

Everything here is arithmetic over range sets (the batches delivered, in batch numbers), as
`EpochPlan`'s is over positions: nothing is kept per sample.

A resume with another per-rank batch size cuts the rest again (`RecutOrder`): the batches no
world delivered, bucket by bucket, cut into batches of the new size, laid out one after another;
`WholeBatchPlan` then deals those (with ``order_ranks=1``) as it deals any. With W == W0 and nothing delivered
before, the dealing is `EpochPlan`'s own (rank r's slot s is position r + s * W).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ConfigurationError
from ._bucket_order import BucketOrder
from ._epoch_plan import EpochPlan
from ._ranges import PositionSet, runs

__all__ = ["RecutOrder", "WholeBatchPlan", "batches_of_positions", "merged_whole_batches", "positions_of_batches"]


def positions_of_batches(batches: PositionSet, *, order_ranks: int, batch_size: int) -> PositionSet:
    """The positions of ``batches`` (numbers in the layout for ``order_ranks`` ranks) as ranges:
    a run of whole rounds is one range, a batch of a partly taken round ``batch_size`` strided
    positions."""
    span = order_ranks * batch_size
    starts, ends = batches.arrays()
    whole_from = -(-starts // order_ranks)  # first whole round of each run
    whole_to = ends // order_ranks  # past its last whole round
    has_whole = whole_to > whole_from
    ranges = [(int(first) * span, int(last) * span) for first, last in zip(whole_from[has_whole], whole_to[has_whole])]
    loose = []
    for start, end, first, last, whole in zip(starts, ends, whole_from, whole_to, has_whole):
        edges = [(int(start), int(first) * order_ranks), (int(last) * order_ranks, int(end))] if whole else [(int(start), int(end))]
        loose += [np.arange(low, high, dtype=np.int64) for low, high in edges if high > low]
    if loose:
        batch = np.concatenate(loose)
        within = np.arange(batch_size, dtype=np.int64) * order_ranks
        positions = ((batch // order_ranks) * span + batch % order_ranks)[:, None] + within[None, :]
        return PositionSet(ranges).union(PositionSet(runs(positions.ravel())))
    return PositionSet(ranges)


def batches_of_positions(positions: PositionSet, *, order_ranks: int, batch_size: int) -> PositionSet:
    """The batches whose every position is in ``positions`` (the inverse of `positions_of_batches`).

    Raises:
        ConfigurationError: ``positions`` holds part of a batch (a bucketed epoch is delivered,
            and left out, a whole batch at a time: a state saying otherwise is damaged).
    """
    span = order_ranks * batch_size
    starts, ends = positions.arrays()
    whole_from, whole_to = -(-starts // span), ends // span
    has_whole = whole_to > whole_from
    ranges = [(int(first) * order_ranks, int(last) * order_ranks) for first, last in zip(whole_from[has_whole], whole_to[has_whole])]
    # Rounds partly covered: each of their batches looked at whole (few: the edges of the runs).
    partial = np.unique(np.concatenate([starts // span, (ends - 1) // span])) if len(starts) else np.zeros(0, np.int64)
    partial = partial[~PositionSet(ranges).contains(partial * order_ranks)] if ranges else partial
    if len(partial):
        column = np.arange(order_ranks, dtype=np.int64)
        within = np.arange(batch_size, dtype=np.int64)[:, None] * order_ranks
        for round_number in partial.tolist():
            members = positions.contains(round_number * span + within + column[None, :])
            ranges += [
                (round_number * order_ranks + int(c), round_number * order_ranks + int(c) + 1) for c in np.flatnonzero(members.all(axis=0))
            ]
    batches = PositionSet(ranges)
    if len(positions_of_batches(batches, order_ranks=order_ranks, batch_size=batch_size)) != len(positions):
        raise ConfigurationError(
            "a bucketed epoch's record holds part of a batch (its batches are delivered and left out whole): the state is damaged"
        )
    return batches


class WholeBatchPlan(EpochPlan):
    """This rank's remaining batches of a bucketed epoch, dealt whole (see the module notes).

    Args:
        order: Storage indices of epoch positions (the `BucketOrder` for ``order_ranks``).
        num_samples: Positions in the epoch (its full batches' samples).
        rank: This rank.
        world_size: Ranks sharing the remaining batches now.
        excluded: Positions an earlier world delivered or left out (whole batches), or None.
        delivered: Slots of this plan this rank delivered (padding slots not among them).
        padding_delivered: Padding slots delivered (they come last, and are taken in order).
        batch_size: Samples per batch.
        order_ranks: The ranks the epoch's order is laid out for.
    """

    def __init__(
        self,
        order: Callable[[np.ndarray], np.ndarray],
        *,
        num_samples: int,
        rank: int,
        world_size: int,
        excluded: PositionSet | None,
        delivered: PositionSet,
        padding_delivered: int,
        batch_size: int,
        order_ranks: int,
    ) -> None:
        self._order = order
        self.rank, self.world_size = rank, world_size
        self.batch_size, self.order_ranks = batch_size, order_ranks
        done = PositionSet() if excluded is None else batches_of_positions(excluded, order_ranks=order_ranks, batch_size=batch_size)
        self._done_batches = done if len(done) else None
        self._excluded = PositionSet(excluded.arrays()) if excluded is not None else None
        self.remaining_batches = num_samples // batch_size - len(done)
        self.remaining = self.remaining_batches * batch_size
        per_rank = -(-self.remaining_batches // world_size)
        real = min(per_rank, max(0, -(-(self.remaining_batches - rank) // world_size)))
        self.real_slots = real * batch_size
        self.padding_slots = (per_rank - real) * batch_size if self.remaining_batches else 0
        self._start(delivered, padding_delivered)

    def _batch_positions(self, remaining_batches: np.ndarray, within: np.ndarray) -> np.ndarray:
        """The position of sample ``within`` of each of the ``remaining_batches``-th batches not
        done before."""
        batch = self._done_batches.select_outside(remaining_batches) if self._done_batches is not None else remaining_batches
        return (batch // self.order_ranks) * self.order_ranks * self.batch_size + within * self.order_ranks + batch % self.order_ranks

    def _positions(self, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        real = ks < self._real_left
        slots = np.empty(len(ks), np.int64)
        slots[real] = self._delivered.select_outside(ks[real])
        slots[~real] = self._padding_from + ks[~real] - self._real_left
        rounds, within = np.divmod(slots, self.batch_size)
        remaining = self.rank + rounds * self.world_size
        # A short rank's padding batch repeats one of the first batches (each rank another).
        remaining[~real] = remaining[~real] % max(1, self.remaining_batches)
        return self._batch_positions(remaining, within), ~real

    def _batch_and_slot(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        span = self.order_ranks * self.batch_size
        rounds, inside = np.divmod(positions, span)
        return rounds * self.order_ranks + inside % self.order_ranks, inside // self.order_ranks

    def slots_of(self, positions: np.ndarray, *, strict: bool = True) -> np.ndarray:
        positions = np.asarray(positions, np.int64)
        batch, within = self._batch_and_slot(positions)
        done = self._done_batches
        remaining = batch - done.count_below(batch) if done is not None else batch
        rounds, offsets = np.divmod(remaining - self.rank, self.world_size)
        slots = rounds * self.batch_size + within
        wrong = (offsets != 0) | (rounds < 0) | (slots >= self.real_slots)
        if done is not None:
            wrong |= done.contains(batch)
        if wrong.any() and strict:
            raise ConfigurationError(
                f"position {int(positions[np.argmax(wrong)])} is not one of rank {self.rank}'s of {self.world_size} this epoch"
            )
        return slots[~wrong]

    def positions_of_slots(self, slots: np.ndarray) -> np.ndarray:
        rounds, within = np.divmod(np.asarray(slots, np.int64), self.batch_size)
        return self._batch_positions(self.rank + rounds * self.world_size, within)

    def delivered_batches(self, slots: PositionSet) -> PositionSet:
        """The batch numbers (of the epoch's layout) of this rank's delivered ``slots``.

        Raises:
            ConfigurationError: The slots hold part of a batch (a damaged state).
        """
        starts, ends = slots.arrays()
        if ((starts % self.batch_size) | (ends % self.batch_size)).any():
            raise ConfigurationError(
                f"rank {self.rank}'s record of a bucketed epoch holds part of a batch (its batches are delivered whole): the state is damaged"
            )
        rounds = PositionSet((starts // self.batch_size, ends // self.batch_size)).members(self.remaining_batches + 1)
        remaining = self.rank + rounds * self.world_size
        remaining = remaining[remaining < self.remaining_batches]
        batch = self._done_batches.select_outside(remaining) if self._done_batches is not None else remaining
        return PositionSet(runs(batch))


def merged_whole_batches(plans: list[WholeBatchPlan], records: list[PositionSet]) -> PositionSet:
    """Every position a saved world of a bucketed epoch delivered or left out, as ranges: what it
    had done before (``plans[0]``'s exclusions) and each rank's delivered batches (its
    ``records``, slots of its plan). The batches every rank delivered make one run of the
    remaining ones, kept as a range; only those some ranks delivered and others not (what was in
    flight) are looked at one by one.

    Raises:
        ConfigurationError: A record holds part of a batch (a damaged state).
    """
    first = plans[0]
    common = records[0]
    for record in records[1:]:
        common = common.intersection(record)
    starts, ends = common.arrays()
    rounds = ends // first.batch_size  # the whole rounds every rank delivered, from its first
    done = first._done_batches
    taken = PositionSet()
    if len(starts) and int(starts[0]) == 0 and int(rounds[0]) > 0:
        last = min(first.remaining_batches, int(rounds[0]) * first.world_size)
        end = int(done.select_outside(np.array([last - 1]))[0]) + 1 if done is not None else last
        taken = PositionSet([(0, end)])
        common = PositionSet([(0, int(rounds[0]) * first.batch_size)])
    else:
        common = PositionSet()
    for plan, record in zip(plans, records):
        taken = taken.union(plan.delivered_batches(record.difference(common)))
    batches = taken if done is None else taken.union(done)
    return positions_of_batches(batches, order_ranks=first.order_ranks, batch_size=first.batch_size)


class RecutOrder:
    """The rest of a bucketed epoch cut again for another batch size (a resume with another
    per-rank batch size): the batches of ``order`` no earlier world delivered or left out
    (whole batches of ``order.batch_size``) are taken bucket by bucket in the epoch's order, and
    each bucket's samples cut into batches of ``batch_size``; a bucket's last partial batch is
    left over (read in a later epoch, as a bucketed epoch's leftovers are). The new batches keep
    the epoch's order (each where its first sample was) and are laid out one after another
    (batch q is positions ``q * batch_size`` on), so `WholeBatchPlan` deals them over any world
    with ``order_ranks=1``.

    Arrays of one entry per batch are kept (a few MB at 10^7 samples), none per sample.

    The epoch's first order is `first`; `batches`, `length` and `left_over` are the rest's.

    Args:
        order: The epoch's bucketed order, cut for the batch size it began with.
        done: Positions of ``order`` delivered or left out (whole batches), or None.
        batch_size: The batch size the rest is cut for.

    Raises:
        ConfigurationError: ``done`` holds part of a batch (a damaged state), or no bucket's
            rest holds a full batch of the new size.
    """

    ranks = 1  # the new batches' layout: one after another

    def __init__(self, order: BucketOrder, done: PositionSet | None, *, batch_size: int) -> None:
        before, ranks_before = order.batch_size, order.ranks
        self.first, self.batch_size_before, self.ranks_before, self.batch_size = order, before, ranks_before, batch_size
        self.done = done
        batches = order.batches
        taken = PositionSet() if done is None else batches_of_positions(done, order_ranks=ranks_before, batch_size=before)
        remaining = PositionSet([(0, batches)]).difference(taken).members(batches) if batches else np.zeros(0, np.int64)
        bucket = order.bucket_of_batch(remaining)
        grouped = np.argsort(bucket, kind="stable")
        self._old_batches = remaining[grouped]  # the rest's batches, bucket by bucket, each in the epoch's order
        numbers, first, counts = np.unique(bucket[grouped], return_index=True, return_counts=True)
        samples = counts * before
        full = samples // batch_size
        # Each new batch: its bucket's first old batch (an index into _old_batches) and its start
        # in that bucket's samples; ordered by the old batch its first sample is in.
        group = np.repeat(np.arange(len(numbers)), full)
        start = (np.arange(int(full.sum())) - np.repeat(np.cumsum(full) - full, full)) * batch_size
        where = self._old_batches[first[group] + start // before] if len(group) else np.zeros(0, np.int64)
        ordered = np.lexsort((start % before, where))
        self._group_first, self._start = first[group][ordered], start[ordered]
        self.batches = len(ordered)
        self.length = self.batches * batch_size
        self.left_over = int((samples - full * batch_size).sum())
        self._tails = [(int(index), int(used), int(total)) for index, used, total in zip(first, full * batch_size, samples)]
        if self.batches == 0:
            raise ConfigurationError(
                f"no bucket's rest holds a full batch of {batch_size}: continue with batch size {before}, or begin the next epoch"
            )

    def old_positions(self, positions: np.ndarray) -> np.ndarray:
        """The position in the epoch's first order of each of ``positions`` (in [0, length))."""
        batch, within = np.divmod(np.asarray(positions, np.int64), self.batch_size)
        return self._old_position(self._group_first[batch], self._start[batch] + within)

    def left_over_positions(self) -> np.ndarray:
        """The positions, in the epoch's first order, of the samples the cut leaves over (each
        bucket's last partial batch of the new size: fewer than a batch a bucket)."""
        parts = [
            self._old_position(np.full(total - used, first), np.arange(used, total, dtype=np.int64)) for first, used, total in self._tails
        ]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _old_position(self, first: np.ndarray, element: np.ndarray) -> np.ndarray:
        """The position in the epoch's first order of sample ``element`` of the rest of the
        bucket whose first old batch is ``_old_batches[first]``."""
        old_batch = self._old_batches[first + element // self.batch_size_before]
        ranks, before = self.ranks_before, self.batch_size_before
        return (old_batch // ranks) * ranks * before + (element % before) * ranks + old_batch % ranks

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The storage index at each of ``positions`` (in [0, length))."""
        positions = np.asarray(positions, np.int64)
        if len(positions) and (int(positions.min()) < 0 or int(positions.max()) >= self.length):
            raise ConfigurationError(f"a position outside the {self.length} of an epoch cut again for batch size {self.batch_size}")
        return np.asarray(self.first(self.old_positions(positions)), np.int64)
