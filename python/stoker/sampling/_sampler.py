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
merely fetched), possibly out of order. Its state is (seed, epoch, delivered positions as ranges).
Continuing with the same world size needs this rank's state; continuing with another world size
(elastic) needs every rank's state, merged: the remaining positions of the epoch, in the epoch's
order, are dealt again over the new ranks.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._block_order import block_order, block_starts
from ._plan import BatchPlan
from ._ranges import PositionSet

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
        seed: Seeds every epoch's permutation together with the epoch number.
        rank: This process's rank.
        world_size: Number of ranks.
        pad: Equalize counts by repeating samples (flagged), else drop the uneven tail.
        blocks: Samples in each storage block, in storage order (``Storage.block_sizes()``):
            shuffle by blocks (see `block_order`). None: the uniform shuffle.
        window: Blocks per rank whose samples are shuffled together (the block shuffle only).

    Raises:
        ValueError: Bad sizes or rank, or blocks that do not cover ``num_samples``.
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
    ) -> None:
        if num_samples < 1:
            raise ValueError(f"num_samples must be positive, got {num_samples}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in a world of {world_size}")
        self.num_samples = num_samples
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.pad = pad
        self.epoch = 0
        if blocks is not None and int(block_starts(blocks)[-1]) != num_samples:
            raise ValueError(f"the blocks hold {int(block_starts(blocks)[-1])} samples, not {num_samples}")
        if window < 1:
            raise ValueError(f"window must be positive, got {window}")
        self.blocks = None if blocks is None else [int(size) for size in blocks]
        self.window = window
        # The world size the block order is laid out for: this one, or the saved run's after an
        # elastic resume (the positions in the states refer to that run's order).
        self._order_ranks = world_size
        # Guards the delivery record: the training loop marks while a checkpoint thread reads.
        self._lock = threading.RLock()
        self._delivered = PositionSet()
        self._padding_delivered = 0
        # Positions already delivered before an elastic resume, by any rank: excluded for all.
        self._excluded: PositionSet | None = None

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` (forgets what was delivered in the previous one)."""
        with self._lock:
            self.epoch = epoch
            self._delivered = PositionSet()
            self._padding_delivered = 0
            self._excluded = None
            self._order_ranks = self.world_size

    @property
    def scheme(self) -> str:
        """``"sequential"``, ``"uniform"`` or ``"block"``: how `order` is drawn."""
        return "sequential" if not self.shuffle else "uniform" if self.blocks is None else "block"

    def order(self) -> np.ndarray:
        """The epoch's global order: storage indices by position."""
        if not self.shuffle:
            return np.arange(self.num_samples, dtype=np.int64)
        if self.blocks is not None:
            return block_order(self.blocks, seed=self.seed, epoch=self.epoch, window=self.window, ranks=self._order_ranks)
        return np.random.default_rng([self.seed, self.epoch]).permutation(self.num_samples)

    def _blocks_digest(self) -> int | None:
        return None if self.blocks is None else zlib.crc32(np.asarray(self.blocks, np.int64).tobytes())

    def _remaining_positions(self) -> np.ndarray:
        """Positions of this epoch still to deliver by the whole world (in order)."""
        if self._excluded is None:
            return np.arange(self.num_samples, dtype=np.int64)
        return np.nonzero(~self._excluded.mask(self.num_samples))[0]

    def plan_arrays(self) -> BatchPlan:
        """This rank's samples for the rest of the epoch as a `BatchPlan` of arrays (positions,
        storage indices, padding flags), in order, equal in count across ranks. Arrays, not
        objects: a plan over a million samples takes milliseconds."""
        with self._lock:
            return self._plan_locked()

    def _plan_locked(self) -> BatchPlan:
        order = self.order()
        remaining = self._remaining_positions()
        per_rank = -(-len(remaining) // self.world_size) if self.pad else len(remaining) // self.world_size
        mine = remaining[self.rank :: self.world_size][:per_rank]
        extra = per_rank - len(mine)
        # Pad with the epoch's first remaining positions (flagged; never counted as delivered).
        padding_positions = remaining[np.arange(extra) % len(remaining)] if extra > 0 else np.zeros(0, np.int64)
        padding_positions = padding_positions[self._padding_delivered :]
        delivered = self._delivered.mask(self.num_samples)
        mine = mine[~delivered[mine]]
        positions = np.concatenate([mine, padding_positions]).astype(np.int64)
        padding = np.concatenate([np.zeros(len(mine), bool), np.ones(len(padding_positions), bool)])
        return BatchPlan(positions, order[positions].astype(np.int64), padding)

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
        )
        upcoming.set_epoch(self.epoch + 1)
        return upcoming.plan_arrays()[1][:count]

    def plan(self) -> list[SamplePlan]:
        """`plan_arrays` as a list of `SamplePlan`."""
        positions, indices, padding = self.plan_arrays()
        return [SamplePlan(int(p), int(i), bool(f)) for p, i, f in zip(positions, indices, padding)]

    def __iter__(self) -> Iterator[SamplePlan]:
        return iter(self.plan())

    def __len__(self) -> int:
        return len(self.plan_arrays()[0])

    def mark_delivered(self, positions: Sequence[int] | np.ndarray, padding: Sequence[bool] | np.ndarray) -> None:
        """Record samples that reached the training loop (padding included, so a resumed rank
        still ends with the same count as the others)."""
        flags = np.asarray(padding, dtype=bool)
        real = np.asarray(positions)[~flags].tolist()
        with self._lock:
            self._delivered.add_many(real)
            self._padding_delivered += int(flags.sum())

    def unmark_delivered(self, positions: Sequence[int] | np.ndarray, padding: Sequence[bool] | np.ndarray) -> None:
        """Undo `mark_delivered` for samples that never reached the training loop after all (a
        wrapper read them ahead and stopped): a continued epoch reads them again."""
        flags = np.asarray(padding, dtype=bool)
        real = np.asarray(positions)[~flags].tolist()
        with self._lock:
            self._delivered.remove_many(real)
            self._padding_delivered = max(0, self._padding_delivered - int(flags.sum()))

    def delivered_positions(self) -> np.ndarray:
        """The positions of this epoch delivered so far (this rank's, and before an elastic
        resume, every rank's), ascending."""
        with self._lock:
            mask = self._delivered.mask(self.num_samples)
            if self._excluded is not None:
                mask |= self._excluded.mask(self.num_samples)
            return np.flatnonzero(mask)

    @property
    def delivered(self) -> int:
        """Samples of this epoch delivered by this rank (padding not counted)."""
        return len(self._delivered)

    @property
    def delivered_count(self) -> int:
        """Samples delivered by this rank in this epoch, padding included."""
        with self._lock:
            return len(self._delivered) + self._padding_delivered

    def state_dict(self, holding: Sequence[tuple[Any, Any]] = ()) -> dict[str, Any]:
        """Plain data: what this rank delivered in this epoch, and what defines the order. Safe
        from any thread at any moment: the record is taken whole, between two deliveries.

        Args:
            holding: (positions, padding) of batches marked delivered that a wrapper still holds
                (read ahead, not yet handed to the training loop): left out of the record.
        """
        with self._lock:
            state = self._state_locked()
        if holding:
            delivered = PositionSet(tuple(span) for span in state["delivered"])
            delivered.remove_many(
                position for positions, padding in holding for position in np.asarray(positions)[~np.asarray(padding, dtype=bool)]
            )
            state["delivered"] = [list(span) for span in delivered.ranges()]
            held_padding = sum(int(np.asarray(padding, dtype=bool).sum()) for _, padding in holding)
            state["padding_delivered"] = max(0, state["padding_delivered"] - held_padding)
        return state

    def _state_locked(self) -> dict[str, Any]:
        excluded = self._excluded.ranges() if self._excluded is not None else []
        return {
            "version": 1,
            "num_samples": self.num_samples,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "epoch": self.epoch,
            "rank": self.rank,
            "world_size": self.world_size,
            "delivered": [list(span) for span in self._delivered.ranges()],
            "padding_delivered": self._padding_delivered,
            "excluded": [list(span) for span in excluded],
            "scheme": self.scheme,
            "window": self.window,
            "order_ranks": self._order_ranks,
            "blocks_crc": self._blocks_digest(),
        }

    def load_state_dict(self, state: dict[str, Any] | Sequence[dict[str, Any]]) -> None:
        """Continue an epoch.

        Args:
            state: This rank's `state_dict` (same world size), or the list of every rank's
                states (any world size: the remaining samples are dealt over the new ranks).

        Raises:
            ValueError: States from another dataset size, seed or epoch, or one state for a
                different world size.
        """
        with self._lock:
            self._load_locked(state)

    def _load_locked(self, state: dict[str, Any] | Sequence[dict[str, Any]]) -> None:
        states = [state] if isinstance(state, dict) else list(state)
        if not states:
            raise ValueError("no state to load")
        first = states[0]
        for saved in states:
            if saved.get("version") != 1:
                raise ValueError(f"sampler state version {saved.get('version')} is not 1")
            if (saved["num_samples"], saved["shuffle"], saved["seed"], saved["epoch"]) != (
                first["num_samples"],
                first["shuffle"],
                first["seed"],
                first["epoch"],
            ):
                raise ValueError("the states come from different epochs or datasets")
        if first["num_samples"] != self.num_samples:
            raise ValueError(f"the state is for {first['num_samples']} samples, this storage has {self.num_samples}")
        saved_scheme = first.get("scheme", "uniform" if first["shuffle"] else "sequential")
        if first["shuffle"] and saved_scheme != ("uniform" if self.blocks is None else "block"):
            raise ValueError(f"the state comes from a {saved_scheme} shuffle; this sampler uses a {self.scheme} shuffle")
        if saved_scheme == "block" and (first["blocks_crc"], first["window"]) != (self._blocks_digest(), self.window):
            raise ValueError("the state comes from another block layout or window; resume with the same storage and window")
        self._order_ranks = int(first["order_ranks"] if "order_ranks" in first else first["world_size"])
        self.shuffle, self.seed, self.epoch = first["shuffle"], first["seed"], first["epoch"]
        if isinstance(state, dict):
            if state["world_size"] != self.world_size or state["rank"] != self.rank:
                raise ValueError(
                    f"one state from rank {state['rank']} of {state['world_size']} cannot resume rank {self.rank} of "
                    f"{self.world_size}; pass every rank's state to change the world size"
                )
            self._delivered = PositionSet(tuple(span) for span in state["delivered"])
            self._padding_delivered = int(state.get("padding_delivered", 0))
            self._excluded = PositionSet(tuple(span) for span in state["excluded"]) if state["excluded"] else None
            return
        ranks = sorted(saved["rank"] for saved in states)
        if ranks != list(range(first["world_size"])):
            raise ValueError(f"expected the states of ranks 0..{first['world_size'] - 1}, got ranks {ranks}")
        merged = PositionSet()
        for saved in states:
            merged = merged.union(PositionSet(tuple(span) for span in saved["delivered"]))
            merged = merged.union(PositionSet(tuple(span) for span in saved["excluded"]))
        self._excluded = merged
        self._delivered = PositionSet()
        self._padding_delivered = 0
