"""Which samples each rank reads, in which order, and exactly where to continue after a stop.

The order of an epoch is a permutation of all sample indices drawn from (seed, epoch), so every
rank computes the same global order without talking to the others. Rank r of W takes positions
r, r + W, r + 2W, ... of that order. Ranks get equal counts (a collective step on one rank while
another has run out hangs distributed training): with ``pad=True`` the short ranks repeat samples
from the start of the order and those are flagged as padding; with ``pad=False`` the tail that
does not divide evenly is left out of this epoch. Nothing is ever silently unequal.

With ``blocks`` (the storage's runs of consecutive samples: shards, Parquet row groups), the
shuffle is the block shuffle of `block_order` instead: each rank reads a few blocks at a time,
which is what object stores and columnar files need. Resume works the same for both.

Exact resume: the sampler is told which positions were *delivered* to the training loop (not
merely fetched), possibly out of order. Its state is (seed, epoch, this rank's delivered plan
slots as ranges). Continuing with the same world size needs this rank's state; continuing with
another world size (elastic) needs every rank's state, merged: the remaining positions of the
epoch, in the epoch's order, are dealt again over the new ranks (a bucketed epoch's a whole
batch at a time, `WholeBatchPlan`, so that every batch stays one bucket's).

At any scale: the order is a function of the position (`IndexPermutation`, `BlockOrder`), the
plan is computed a chunk at a time (`EpochPlan`), and the delivery record is kept as slots of
this rank's plan, where delivery is contiguous: a few ranges whether the epoch holds a thousand
samples or a billion, so marking a batch and taking a checkpoint cost the same at the end of an
epoch as at its start.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigurationError
from ._block_order import BlockOrder, block_starts
from ._bucket_order import BucketOrder, check_leftovers
from ._epoch_plan import EpochPlan
from ._permutation import AppendedOrder, IndexPermutation, identity_order
from ._ranges import PositionSet, runs
from ._sampler_state import SAMPLER_STATE_VERSION, SamplerSettings, check_seed, cut_state, read_cut, read_saved_world
from ._whole_batch_plan import RecutOrder, WholeBatchPlan

__all__ = ["Sampler", "SamplePlan"]


@dataclass(frozen=True)
class SamplePlan:
    """One sample to read: its position in the epoch's order, its index in the storage, and
    whether it only pads this rank to an equal count."""

    position: int
    index: int
    padding: bool = False


class Sampler:
    """Deterministic, shardable, exactly resumable order over ``num_samples`` samples.

    Args:
        num_samples: Samples in the storage.
        shuffle: Permute per epoch (a uniform global shuffle, or the block shuffle when
            ``blocks`` is given); else storage order.
        seed: Seeds every epoch's permutation together with the epoch number (0 to 2**64 - 1).
        rank: This process's rank.
        world_size: Number of ranks.
        pad: Equalize counts by repeating samples (flagged), else drop the uneven tail.
        blocks: Samples in each storage block, in storage order (``Storage.block_sizes()``):
            shuffle by blocks (see `block_order`). None: the uniform shuffle.
        window: Blocks per rank whose samples are shuffled together (the block shuffle only).
        buckets: Each sample's bucket number (-1: none) and how many buckets there are, with
            ``batch_size``: the bucketed order of `BucketOrder` (each batch of each rank one
            bucket's, equal steps per rank, leftovers counted and read in later epochs).
        batch_size: The batch size the bucketed order is cut for (with ``buckets`` only).
        leftovers: With ``buckets``, what becomes of each epoch's leftovers: ``"drop"`` (a later
            epoch's shuffle gives them their turn) or ``"carry"`` (the next epoch reads them
            first of their bucket, in that bucket's first batches wherever the shuffle of
            batches puts them, not at the epoch's start); see `BucketOrder`.

    Raises:
        ValueError: Bad sizes, seed or rank, or blocks that do not cover ``num_samples``.
    """

    def __init__(
        self,
        num_samples: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        pad: bool = True,
        blocks: Sequence[int] | None = None,
        window: int = 32,
        buckets: tuple[np.ndarray, int] | None = None,
        batch_size: int = 1,
        leftovers: str = "drop",
    ) -> None:
        if num_samples < 1:
            raise ConfigurationError(f"num_samples must be positive, got {num_samples}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ConfigurationError(f"rank {rank} is not in a world of {world_size}")
        self.num_samples = num_samples
        self.shuffle = shuffle
        self.seed = check_seed(seed)
        self.rank = rank
        self.world_size = world_size
        self.pad = pad
        self.epoch = 0
        if blocks is not None and int(block_starts(blocks)[-1]) != num_samples:
            raise ConfigurationError(f"the blocks hold {int(block_starts(blocks)[-1])} samples, not {num_samples}")
        if window < 1:
            raise ConfigurationError(f"window must be positive, got {window}")
        self.blocks = None if blocks is None else [int(size) for size in blocks]
        self.window = window
        if buckets is not None and (blocks is not None or not shuffle):
            raise ConfigurationError("buckets shuffle by bucket: give buckets or blocks, and shuffle=True")
        if buckets is not None and len(buckets[0]) != num_samples:
            raise ConfigurationError(f"{len(buckets[0])} bucket numbers for {num_samples} samples")
        self.buckets = None if buckets is None else (np.asarray(buckets[0], dtype=np.int16), int(buckets[1]))
        self.batch_size = batch_size
        self.leftovers = check_leftovers(leftovers)
        # What the bucketed order is drawn from, digested once: a checkpoint costs the same at any scale.
        self._buckets_crc = self._buckets_digest(batch_size)
        # A bucketed epoch resumed with another batch size: its rest, cut again (see `RecutOrder`).
        self._cut: RecutOrder | None = None
        # The world size the block order is laid out for: this one, or the saved run's after an
        # elastic resume (the positions in the states refer to that run's order).
        self._order_ranks = world_size
        # Guards the delivery record: the training loop marks while a checkpoint thread reads.
        self._lock = threading.RLock()
        self._delivered = PositionSet()  # slots of this rank's plan (see EpochPlan)
        self._padding_delivered = 0
        # Positions already delivered before an elastic resume, by any rank: excluded for all.
        self._excluded: PositionSet | None = None
        self._order_cache: tuple[tuple[int, int, int], Callable[[np.ndarray], np.ndarray]] | None = None
        self._layout: EpochPlan | None = None
        self._appended = 0  # positions past the blocks' (see `set_domain`)

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` (forgets what was delivered in the previous one).

        Raises:
            ValueError: A negative or non-integer epoch.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ConfigurationError(f"epoch must be a whole number >= 0, got {epoch!r}")
        with self._lock:
            self.epoch = int(epoch)
            self._delivered = PositionSet()
            self._padding_delivered = 0
            self._excluded = None
            self._order_ranks = self.world_size
            self._layout = None
            self._cut = None

    def set_domain(self, num_samples: int, blocks: Sequence[int] | None, *, appended: int = 0, bucket_of: np.ndarray | None = None) -> None:
        """Draw the orders over another number of samples from now on: the storage behind the
        sampler changed (a dataset that gained or lost samples, continued by key, see
        `stoker.loader.Loader.load_state_dict`; the samples a scheduled filter keeps this
        epoch). Forgets what was delivered, as `set_epoch`.

        Args:
            num_samples: Samples in the order.
            blocks: The storage's blocks (with the block shuffle), None otherwise; they cover
                ``num_samples - appended`` samples.
            appended: Samples after the blocks' (or after the first ``num_samples - appended``),
                placed at the end of each order, shuffled among themselves: samples that joined
                an epoch after it began.
            bucket_of: With buckets, each of the samples' bucket number (needed then; no
                appended samples).

        Raises:
            ValueError: Bad sizes, blocks that do not cover the samples, or buckets for other
                samples.
        """
        if not 0 <= appended < num_samples:
            raise ConfigurationError(f"{appended} appended samples of {num_samples}")
        if (blocks is None) != (self.blocks is None) or (blocks is not None and int(block_starts(blocks)[-1]) != num_samples - appended):
            raise ConfigurationError(f"blocks for {num_samples - appended} samples are needed with the block shuffle")
        if (self.buckets is not None) != (bucket_of is not None) or (bucket_of is not None and (appended or len(bucket_of) != num_samples)):
            raise ConfigurationError(
                f"a bucketed order is drawn over its samples' buckets: give the bucket of each of the {num_samples} samples, none appended"
            )
        with self._lock:
            self.num_samples = num_samples
            self.blocks = None if blocks is None else [int(size) for size in blocks]
            if self.buckets is not None and bucket_of is not None:
                self.buckets = (np.asarray(bucket_of, dtype=np.int16), self.buckets[1])
                self._buckets_crc = self._buckets_digest(self.batch_size)
            self._appended = appended
            self._order_cache = None
            self.set_epoch(self.epoch)

    def leave_out(self, positions: np.ndarray) -> None:
        """Leave ``positions`` out of this epoch for every rank (samples gone from the storage, or
        cut out by key), the rest dealt again: what was delivered so far is first taken as done
        for the world (`settle_deliveries`).

        Raises:
            ConfigurationError: This rank's deliveries cannot tell the world's (see
                `settle_deliveries`).
        """
        with self._lock:
            self._settle_locked()
            starts, ends = runs(np.asarray(positions, np.int64))
            gone = PositionSet((starts, ends))
            self._excluded = gone if self._excluded is None else self._excluded.union(gone)
            self._layout = None

    def leave_out_beyond(self, positions: np.ndarray, *, slot: int | None) -> np.ndarray:
        """Leave out of this epoch, for every rank, those of ``positions`` that no rank is dealt
        among its first ``slot`` slots; the rest of each rank's plan from ``slot`` on is dealt
        again without them. Unlike `leave_out`, nothing delivered is settled: the first ``slot``
        slots of every rank keep their positions (the plan deals the positions no earlier world
        took in order, and only later ones go), so this rank's record stays as it is, and a batch
        a read-ahead wrapper holds can still be handed back (`unmark_delivered`).

        Every rank must pass the same ``slot``, at or past each rank's last slot delivered or
        held (`stoker.loader.Loader.exclude` takes it from the step the training loop is at and
        how far its wrapper reads ahead).

        Args:
            positions: Positions of this epoch to leave out.
            slot: The first slot of each rank's plan dealt again; None: the end of this rank's
                record (one rank only: its record is the world's).

        Returns:
            A mask of ``positions``: True where left out (False: dealt before ``slot`` on some
            rank, or not in this epoch's rest).

        Raises:
            ConfigurationError: This rank delivered a slot at or past ``slot``; None with
                several ranks; a bucketed epoch (its batches are dealt whole).
        """
        positions = np.asarray(positions, np.int64)
        with self._lock:
            if self.buckets is not None:
                raise ConfigurationError("a bucketed epoch deals whole batches of one bucket: leave batches out by step instead")
            plan = self._plan_locked(PositionSet())
            reached = int(self._delivered.arrays()[1][-1]) if len(self._delivered) else 0
            if self._padding_delivered:  # padding comes after every real slot
                reached = plan.real_slots + self._padding_delivered
            if slot is None:
                if self.world_size != 1:
                    raise ConfigurationError("with several ranks, positions are left out from a slot every rank agrees on")
                slot = reached
            if reached > slot:
                raise ConfigurationError(
                    f"rank {self.rank} delivered slot {reached - 1} of its plan, past slot {slot} from which positions are left out "
                    "for every rank: its batches were read further ahead than the exclusion allowed for"
                )
            excluded = self._excluded if self._excluded is not None else PositionSet()
            dealt = min(slot * self.world_size, plan.remaining)  # positions outside `excluded` dealt before `slot`
            inside = excluded.contains(positions) if len(excluded) else np.zeros(positions.shape, bool)
            ranks = positions - excluded.count_below(positions) if len(excluded) else positions
            going = ~inside & (ranks >= dealt) & (positions < self.epoch_length)
            if going.any():
                starts, ends = runs(np.unique(positions[going]))
                gone = PositionSet((starts, ends))
                self._excluded = gone if self._excluded is None else self._excluded.union(gone)
                self._layout = None
            return going

    def settle_deliveries(self) -> None:
        """Take what every rank delivered so far in this epoch as done for the world (positions
        no rank reads again, as after a resume from every rank's states), so the rest can be
        dealt again. In a world of one rank, its record is the world's. In a world of several,
        the ranks go in step (each delivers a batch a step), so when this rank has delivered the
        first t slots of its plan, every rank has delivered its first t, and those are the first
        t x world_size positions of the plan's order: a range, whatever t is. Every rank must call
        this at the same step (`stoker.loader.Loader.exclude` does, between the same two batches).

        Raises:
            ConfigurationError: This rank delivered other than its plan's first slots in order.
        """
        with self._lock:
            self._settle_locked()

    def _settle_locked(self) -> None:
        if not len(self._delivered) and not self._padding_delivered:
            return
        if self.world_size == 1:
            # One rank's record is the world's: kept as positions, it stays valid as the layout changes.
            done = self._my_delivered_locked()
            starts, ends = runs(done)
            settled = PositionSet((starts, ends))
        else:
            if self.buckets is not None and (self.world_size != self._order_ranks or self._excluded is not None):
                raise ConfigurationError("a bucketed epoch dealt again a whole batch at a time cannot leave positions out while it runs")
            slots = self._delivered.ranges()
            if len(slots) > 1 or (slots and slots[0][0] != 0):
                raise ConfigurationError(
                    f"positions are left out for every rank while the ranks go in step: this rank delivered slots {slots[:3]} "
                    "of its plan, not its first ones in order"
                )
            taken = (slots[0][1] if slots else 0) + self._padding_delivered
            excluded = self._excluded if self._excluded is not None else PositionSet()
            count = min(taken * self.world_size, self.epoch_length - len(excluded))
            end = int(excluded.select_outside(np.array([count - 1], np.int64))[0]) + 1 if count > 0 else 0
            settled = PositionSet([(0, end)]) if end else PositionSet()
        self._excluded = settled if self._excluded is None else self._excluded.union(settled)
        self._delivered = PositionSet()
        self._padding_delivered = 0
        self._layout = None

    @property
    def scheme(self) -> str:
        """``"sequential"``, ``"uniform"`` or ``"block"``: how `order` is drawn."""
        if self.buckets is not None:
            return "bucket"
        return "sequential" if not self.shuffle else "uniform" if self.blocks is None else "block"

    def order_function(self) -> Callable[[np.ndarray], np.ndarray]:
        """The epoch's order as a function: storage indices of an array of positions."""
        if self._cut is not None:
            return self._cut
        key = (self.epoch, self._order_ranks, self.seed)
        cached = self._order_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        function: Callable[[np.ndarray], np.ndarray]
        if self.buckets is not None:
            function = self._bucket_order(self.seed, self.epoch, self._order_ranks)
        elif not self.shuffle:
            function = identity_order
        elif self.blocks is not None:
            function = BlockOrder(self.blocks, seed=self.seed, epoch=self.epoch, window=self.window, ranks=self._order_ranks)
        else:
            function = IndexPermutation(self.num_samples - self._appended, self.seed, self.epoch)
        if self._appended:
            function = AppendedOrder(function, self.num_samples - self._appended, self._appended, self.shuffle, self.seed, self.epoch)
        self._order_cache = (key, function)
        return function

    def order(self) -> np.ndarray:
        """The epoch's whole order: storage indices by position (costs 8 bytes a sample: for
        inspection and small epochs; the Loader never builds it)."""
        return self.order_function()(np.arange(self.num_samples, dtype=np.int64))

    def _buckets_digest(self, batch_size: int) -> int | None:
        """What a bucketed order of ``batch_size`` is drawn from, digested (None: no buckets)."""
        if self.buckets is None:
            return None
        policy = [1] if self.leftovers == "carry" else []
        return zlib.crc32(self.buckets[0].tobytes() + np.array([self.buckets[1], batch_size, *policy], np.int64).tobytes())

    def _blocks_digest(self) -> int | None:
        if self.buckets is not None:
            return self._buckets_crc
        return None if self.blocks is None else zlib.crc32(np.asarray(self.blocks, np.int64).tobytes())

    @property
    def epoch_length(self) -> int:
        """Positions an epoch's order holds: every sample, or with buckets the samples of the
        full batches dealt (`BucketOrder.length`; the rest are left over this epoch)."""
        if self.buckets is None:
            return self.num_samples
        order = self.order_function()
        assert isinstance(order, (BucketOrder, RecutOrder))
        return order.length

    def epoch_length_of(self, epoch: int) -> int:
        """`epoch_length` of epoch ``epoch`` (with buckets, each epoch's full batches differ)."""
        if self.buckets is None or epoch == self.epoch:
            return self.epoch_length
        return self._bucket_order(self.seed, epoch, self._order_ranks).length

    def plan_arrays(self) -> EpochPlan:
        """This rank's samples for the rest of the epoch as an `EpochPlan` (positions, storage
        indices and padding flags computed a chunk at a time, `EpochPlan.part`), in order, equal
        in count across ranks."""
        with self._lock:
            return self._plan_locked(self._delivered)

    def _plan_locked(self, delivered: PositionSet) -> EpochPlan:
        if self.buckets is not None and (self.world_size != self._order_ranks or self._excluded is not None):
            # Resumed on another world (or after one): the rest is dealt a whole batch at a time.
            return WholeBatchPlan(
                self.order_function(),
                num_samples=self.epoch_length,
                rank=self.rank,
                world_size=self.world_size,
                excluded=self._excluded,
                delivered=delivered,
                padding_delivered=self._padding_delivered,
                batch_size=self.batch_size,
                order_ranks=self._order_ranks,
            )
        return EpochPlan(
            self.order_function(),
            num_samples=self.epoch_length,
            rank=self.rank,
            world_size=self.world_size,
            pad=self.pad,
            excluded=self._excluded,
            delivered=delivered,
            padding_delivered=self._padding_delivered,
        )

    def _slots(self, positions: np.ndarray, *, strict: bool = True) -> np.ndarray:
        """This rank's plan slots of ``positions`` (under the lock)."""
        if self._layout is None:
            self._layout = self._plan_locked(PositionSet())
        return self._layout.slots_of(positions, strict=strict)

    def next_epoch_indices(self, count: int) -> np.ndarray:
        """The storage indices of this rank's first ``count`` samples of the next epoch (nothing
        delivered yet), without changing this sampler: what to request ahead of an epoch boundary."""
        upcoming = Sampler(
            self.num_samples,
            shuffle=self.shuffle,
            seed=self.seed,
            rank=self.rank,
            world_size=self.world_size,
            pad=self.pad,
            blocks=self.blocks,
            window=self.window,
            buckets=self.buckets,
            batch_size=self.batch_size,
            leftovers=self.leftovers,
        )
        upcoming.set_epoch(self.epoch + 1)
        return upcoming.plan_arrays().part(0, count).indices

    def plan(self) -> list[SamplePlan]:
        """`plan_arrays` as a list of `SamplePlan` (one object a sample: for small epochs)."""
        plan = self.plan_arrays()
        positions, indices, padding = plan.part(0, plan.size)
        return [SamplePlan(int(p), int(i), bool(f)) for p, i, f in zip(positions, indices, padding)]

    def __iter__(self) -> Iterator[SamplePlan]:
        return iter(self.plan())

    def __len__(self) -> int:
        return self.plan_arrays().size

    def mark_delivered(self, positions: Sequence[int] | np.ndarray, padding: Sequence[bool] | np.ndarray) -> None:
        """Record samples that reached the training loop (padding included, so a resumed rank
        still ends with the same count as the others).

        Raises:
            ConfigurationError: A position that is not one of this rank's this epoch.
        """
        flags = np.asarray(padding, dtype=bool)
        real = np.asarray(positions, dtype=np.int64)[~flags]
        with self._lock:
            self._delivered.add_many(self._slots(real))
            self._padding_delivered += int(flags.sum())

    def unmark_delivered(self, positions: Sequence[int] | np.ndarray, padding: Sequence[bool] | np.ndarray) -> None:
        """Undo `mark_delivered` for samples that never reached the training loop after all (a
        wrapper read them ahead and stopped): a continued epoch reads them again."""
        flags = np.asarray(padding, dtype=bool)
        real = np.asarray(positions, dtype=np.int64)[~flags]
        with self._lock:
            # Not strict: a batch held across an epoch change is not this epoch's to take back.
            self._delivered.remove_many(self._slots(real, strict=False))
            self._padding_delivered = max(0, self._padding_delivered - int(flags.sum()))

    def _my_delivered_locked(self) -> np.ndarray:
        """The positions this rank delivered in this epoch, ascending (under the lock)."""
        return self._plan_locked(PositionSet()).positions_of_slots(self._delivered.members(self.epoch_length))

    def delivered_positions(self) -> np.ndarray:
        """The positions of this epoch delivered so far (this rank's, and before an elastic
        resume, every rank's), ascending (costs 8 bytes a delivered sample)."""
        with self._lock:
            mine = self._my_delivered_locked()
            excluded = self._excluded.members(self.epoch_length) if self._excluded is not None else np.zeros(0, np.int64)
            return np.union1d(mine, excluded)

    def delivered_mask(self, positions: np.ndarray) -> np.ndarray:
        """Whether each of ``positions`` was delivered in this epoch (by this rank, or before an
        elastic resume by any rank): costs in the positions asked and this rank's record."""
        positions = np.asarray(positions, np.int64)
        with self._lock:
            found = self._excluded.contains(positions) if self._excluded is not None else np.zeros(positions.shape, bool)
            if len(self._delivered):
                mine = self._my_delivered_locked()
                found |= np.isin(positions, mine)
            return found

    @property
    def done_everywhere(self) -> int:
        """Positions of this epoch no rank reads again: those the saved world delivered (after a
        resume from every rank's states) and those left out (`leave_out`)."""
        with self._lock:
            return len(self._excluded) if self._excluded is not None else 0

    @property
    def delivered(self) -> int:
        """Samples of this epoch delivered by this rank (padding not counted)."""
        return len(self._delivered)

    @property
    def cut(self) -> tuple[dict[str, Any], PositionSet | None] | None:
        """How this epoch was cut again for another batch size (see `RecutOrder`): its part of
        `state_dict` and the positions of the first order done before the cut; None: not cut."""
        with self._lock:
            return (cut_state(self._cut), self._cut.done) if self._cut is not None else None

    @property
    def delivered_count(self) -> int:
        """Samples delivered by this rank in this epoch, padding included."""
        with self._lock:
            return len(self._delivered) + self._padding_delivered

    @property
    def record_size(self) -> int:
        """Ranges held by the delivery record (this rank's and the excluded positions'): what a
        checkpoint and the record's memory grow with; a few, however far into the epoch."""
        with self._lock:
            return self._delivered.range_count + (self._excluded.range_count if self._excluded is not None else 0)

    def state_dict(self, holding: Sequence[tuple[Any, Any]] = ()) -> dict[str, Any]:
        """Plain data: what this rank delivered in this epoch (as slots of its plan), and what
        defines the order. Safe from any thread at any moment: the record is taken whole,
        between two deliveries. Its size grows with what is out of order, not with the epoch.

        Args:
            holding: (positions, padding) of batches marked delivered that a wrapper still holds
                (read ahead, not yet handed to the training loop): left out of the record.
        """
        with self._lock:
            delivered = PositionSet(self._delivered.arrays())
            padding_delivered = self._padding_delivered
            for positions, padding in holding:
                flags = np.asarray(padding, dtype=bool)
                delivered.remove_many(self._slots(np.asarray(positions, np.int64)[~flags], strict=False))
                padding_delivered -= int(flags.sum())
            excluded = self._excluded.ranges() if self._excluded is not None else []
            return {
                "version": SAMPLER_STATE_VERSION,
                "num_samples": self.num_samples,
                "shuffle": self.shuffle,
                "seed": self.seed,
                "epoch": self.epoch,
                "rank": self.rank,
                "world_size": self.world_size,
                "delivered": [list(span) for span in delivered.ranges()],
                "padding_delivered": max(0, padding_delivered),
                "excluded": [list(span) for span in excluded],
                "scheme": self.scheme,
                "window": self.window,
                "order_ranks": self._order_ranks,
                "blocks_crc": self._blocks_digest(),
                **({"cut": cut_state(self._cut)} if self._cut is not None else {}),
            }

    def load_state_dict(self, state: dict[str, Any] | Sequence[dict[str, Any]], *, batch_size_before: int | None = None) -> None:
        """Continue an epoch.

        Args:
            state: This rank's `state_dict` (same world size), or the list of every rank's
                states (any world size: the remaining samples are dealt over the new ranks).
            batch_size_before: With buckets, the batch size the states were saved with, where
                it is not this sampler's: the rest of the epoch is cut again for this one
                (`RecutOrder`; every rank's states are needed, and ``leftovers="drop"``).

        Raises:
            ValueError: A state that is not one (a part missing, of the wrong kind or out of
                range: named, before anything is built from it), states from another dataset
                size, seed or epoch, or one state for a different world size; another batch
                size where it cannot be taken (named).
        """
        with self._lock:
            if batch_size_before is not None and self.buckets is not None and batch_size_before != self.batch_size:
                self._recut_locked(state, batch_size_before)
            else:
                self._load_locked(state)

    def _settings(self, batch_size: int, bucket_order: Callable[[int, int, int], Any] | None) -> SamplerSettings:
        return SamplerSettings(
            num_samples=self.num_samples,
            scheme=self.scheme,
            blocks_digest=self._buckets_digest(batch_size) if self.buckets is not None else self._blocks_digest(),
            window=self.window,
            rank=self.rank,
            world_size=self.world_size,
            batch_size=batch_size,
            bucket_order=bucket_order,
        )

    def _load_locked(self, state: dict[str, Any] | Sequence[dict[str, Any]]) -> None:
        listed = isinstance(state, (list, tuple)) and len(state) > 0 and isinstance(state[0], dict)
        first: Any = state if isinstance(state, dict) else state[0] if listed else {}
        cut: RecutOrder | None = None
        order: Callable[[int, int, int], BucketOrder | RecutOrder] | None = self._bucket_order if self.buckets is not None else None
        if self.buckets is not None and "cut" in first:
            # The epoch was cut again for this batch size by an earlier resume: its rest's order.
            began, done = read_cut(
                first, self.num_samples, lambda before, ranks: self._bucket_order(first["seed"], first["epoch"], ranks, before)
            )
            cut = RecutOrder(began, done, batch_size=self.batch_size)
            order = lambda seed, epoch, ranks: cut  # noqa: E731 (the states' positions are the cut's)
        saved = read_saved_world(state, self._settings(self.batch_size, order))  # checked whole before anything changes
        self.shuffle, self.seed, self.epoch = saved.shuffle, saved.seed, saved.epoch
        self._order_ranks = saved.order_ranks
        self._layout = None
        self._cut = cut
        if saved.order is not None and cut is None:  # the order the merge just built: not built again
            self._order_cache = ((self.epoch, self._order_ranks, self.seed), saved.order)
        self._excluded = saved.excluded
        self._delivered = saved.delivered
        self._padding_delivered = saved.padding_delivered

    def _recut_locked(self, state: dict[str, Any] | Sequence[dict[str, Any]], before: int) -> None:
        """Load every rank's states of a bucketed epoch cut for batch size ``before``, and cut
        its rest again for this sampler's (see `RecutOrder`)."""
        if isinstance(state, dict):
            raise ConfigurationError(
                f"a bucketed epoch resumes with another batch size ({before} then, {self.batch_size} now) from every rank's "
                "states (its rest is cut again from what the whole world delivered): pass the list of them"
            )
        if self.leftovers != "drop":
            raise ConfigurationError(
                f"a bucketed epoch with leftovers='carry' resumes with its batch size ({before}): where each later epoch's "
                "stream starts depends on every epoch's batch size; begin the next epoch with the new one"
            )
        if any(isinstance(saved, dict) and "cut" in saved for saved in state):
            raise ConfigurationError(
                "this bucketed epoch was cut again for another batch size once already: resume it with that batch size, "
                "and change it again at the next epoch"
            )
        saved = read_saved_world(state, self._settings(before, lambda seed, epoch, ranks: self._bucket_order(seed, epoch, ranks, before)))
        first = self._bucket_order(saved.seed, saved.epoch, saved.order_ranks, before)
        cut = RecutOrder(first, saved.excluded, batch_size=self.batch_size)
        self.shuffle, self.seed, self.epoch = saved.shuffle, saved.seed, saved.epoch
        self._cut, self._order_ranks, self._layout = cut, 1, None
        self._excluded, self._delivered, self._padding_delivered = None, PositionSet(), 0

    def _bucket_order(self, seed: int, epoch: int, order_ranks: int, batch_size: int | None = None) -> BucketOrder:
        """The bucketed order of ``seed`` and ``epoch`` laid out for ``order_ranks`` ranks (cut
        for ``batch_size``, default this sampler's)."""
        assert self.buckets is not None
        bucket_of, count = self.buckets
        return BucketOrder(
            bucket_of,
            count,
            batch_size=self.batch_size if batch_size is None else batch_size,
            seed=seed,
            epoch=epoch,
            ranks=order_ranks,
            leftovers=self.leftovers,
        )
