"""The block shuffle: an epoch order that reads storage in large contiguous blocks.

A uniform shuffle touches a different place of the storage for every sample: right for local
files, ruinous for object stores and columnar files, where one request or one row group serves
thousands of samples. The block shuffle (in the spirit of MosaicML Streaming's ``py1b``) keeps
each rank inside a few blocks at a time:

1. The blocks (shards, Parquet row groups: runs of consecutive storage indices) are permuted
   with the epoch's generator.
2. They are dealt to the ranks in that order, each to the rank holding the fewest samples so far,
   so ranks get nearly equal counts.
3. Each rank's blocks are taken ``window`` at a time; the samples of those ``window`` blocks are
   permuted together. A batch therefore mixes samples from up to ``window`` blocks (two windows
   at a boundary), and only ``window`` blocks per rank need to be open at once.
4. The ranks' sequences are interleaved, so position ``k * ranks + r`` is rank ``r``'s ``k``-th
   sample: the `Sampler`'s dealing (rank ``r`` takes positions ``r, r + W, ...``) hands each rank
   its own blocks. Where the sequences differ in length, the leftover tail follows in order.

Everything is drawn from (seed, epoch), so every rank computes the same order without talking to
the others, and the order is a permutation: exact resume and no repeats or skips hold as for the
uniform shuffle. `BlockOrder` computes it position by position (memory in blocks, not samples). `shuffle_quality` puts numbers on what this costs against a uniform shuffle.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from ..errors import ConfigurationError

__all__ = ["BlockOrder", "block_order", "block_starts", "shuffle_quality"]

_BLOCK_STREAM = 0x626C6F636B  # "block": keeps this scheme's draws apart from the uniform shuffle's


def block_starts(block_sizes: Sequence[int]) -> np.ndarray:
    """The first storage index of each block, plus the total at the end.

    Raises:
        ValueError: A block of no samples or a negative size.
    """
    sizes = np.asarray(block_sizes, dtype=np.int64)
    if len(sizes) == 0 or (sizes <= 0).any():
        raise ConfigurationError(f"blocks must hold at least one sample each, got sizes {sizes[:10].tolist()}")
    return np.concatenate([[0], np.cumsum(sizes)])


class BlockOrder:
    """The block shuffle's order as a function: storage index by position, computed a chunk at a
    time from (seed, epoch). Holds O(blocks), never O(samples): the blocks' dealing to ranks and
    where each window starts; a window's sample permutation is drawn when a position in it is
    asked for (from its own generator, so any window can be drawn alone) and the last few are
    kept.

    Args:
        block_sizes: Samples in each block, in storage order (they cover every sample).
        seed: Seeds the order, with the epoch.
        epoch: The epoch whose order this is.
        window: Blocks whose samples are shuffled together, per rank.
        ranks: The world size the order is laid out for.

    Raises:
        ValueError: An empty block, or ``window`` or ``ranks`` below 1.
    """

    _KEPT_WINDOWS = 8

    def __init__(self, block_sizes: Sequence[int], *, seed: int, epoch: int, window: int, ranks: int) -> None:
        if window < 1 or ranks < 1:
            raise ConfigurationError(f"window and ranks must be positive, got window={window}, ranks={ranks}")
        self._starts = block_starts(block_sizes)
        sizes = np.diff(self._starts)
        self._seed, self._epoch, self._window, self._ranks = seed, epoch, window, ranks
        generator = np.random.default_rng([seed, epoch, _BLOCK_STREAM])
        dealt: list[list[int]] = [[] for _ in range(ranks)]
        load = [(0, rank) for rank in range(ranks)]  # (samples so far, rank): the lightest first
        for block in generator.permutation(len(sizes)).tolist():
            held, rank = heapq.heappop(load)
            dealt[rank].append(block)
            heapq.heappush(load, (held + int(sizes[block]), rank))
        self._dealt = [np.asarray(blocks, np.int64) for blocks in dealt]
        # Per rank: where each window's samples start in the rank's sequence (and the total).
        self._window_starts = []
        for blocks in self._dealt:
            window_sizes = [int(sizes[blocks[first : first + window]].sum()) for first in range(0, len(blocks), window)]
            self._window_starts.append(np.concatenate([[0], np.cumsum(window_sizes, dtype=np.int64)]))
        lengths = np.array([int(starts[-1]) for starts in self._window_starts], np.int64)
        self._common = int(lengths.min())
        self._tail_starts = np.concatenate([[0], np.cumsum(lengths - self._common)])  # the tails, rank after rank
        self.size = int(self._starts[-1])
        self._kept: dict[tuple[int, int], np.ndarray] = {}

    def _window_samples(self, rank: int, number: int) -> np.ndarray:
        """Storage indices of window ``number`` of ``rank``, in their shuffled order."""
        found = self._kept.get((rank, number))
        if found is None:
            blocks = self._dealt[rank][number * self._window : (number + 1) * self._window]
            indices = np.concatenate([np.arange(self._starts[block], self._starts[block + 1]) for block in blocks.tolist()])
            generator = np.random.default_rng([self._seed, self._epoch, _BLOCK_STREAM, rank + 1, number])
            found = indices[generator.permutation(len(indices))]
            if len(self._kept) >= self._KEPT_WINDOWS:
                self._kept.pop(next(iter(self._kept)))
            self._kept[(rank, number)] = found
        return found

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The storage index at each of ``positions`` (each in [0, size))."""
        positions = np.asarray(positions, np.int64)
        interleaved = positions < self._common * self._ranks
        ranks = np.where(interleaved, positions % self._ranks, 0)
        steps = np.where(interleaved, positions // self._ranks, 0)  # the k-th sample of its rank
        tail = ~interleaved
        if tail.any():
            past = positions[tail] - self._common * self._ranks
            tail_ranks = np.searchsorted(self._tail_starts, past, side="right") - 1
            ranks[tail] = tail_ranks
            steps[tail] = self._common + past - self._tail_starts[tail_ranks]
        result = np.empty(len(positions), np.int64)
        for rank in np.unique(ranks).tolist():
            mine = np.flatnonzero(ranks == rank)
            starts = self._window_starts[rank]
            windows = np.searchsorted(starts, steps[mine], side="right") - 1
            for number in np.unique(windows).tolist():
                chosen = mine[windows == number]
                result[chosen] = self._window_samples(rank, number)[steps[chosen] - starts[number]]
        return result


def block_order(block_sizes: Sequence[int], *, seed: int, epoch: int, window: int, ranks: int) -> np.ndarray:
    """The epoch's whole order (storage indices by position) under the block shuffle: `BlockOrder`
    evaluated at every position (costs 8 bytes a sample: for inspection and tests).

    Raises:
        ValueError: An empty block, or ``window`` or ``ranks`` below 1.
    """
    order = BlockOrder(block_sizes, seed=seed, epoch=epoch, window=window, ranks=ranks)
    return order(np.arange(order.size, dtype=np.int64))


def shuffle_quality(
    order: np.ndarray, block_sizes: Sequence[int], labels: Sequence[int | float | None], batch_size: int
) -> dict[str, float]:
    """How well mixed an order is, as numbers to set against a uniform shuffle's.

    Args:
        order: Storage indices in delivery order (one rank's, or the whole epoch's).
        block_sizes: The storage's blocks, as for `block_order`.
        labels: Every sample's label (None where it has none).
        batch_size: Samples per batch.

    Returns:
        ``blocks_per_batch``: mean distinct blocks a batch draws from (higher is better mixed);
        ``same_label_next``: share of consecutive samples with the same label, and
        ``same_label_expected``: that share for independent draws (sum of squared label
        frequencies); the closer the two, the less the order carries label runs into batches.
    """
    starts = block_starts(block_sizes)
    block_of = np.searchsorted(starts, np.asarray(order, dtype=np.int64), side="right") - 1
    batches = [block_of[first : first + batch_size] for first in range(0, len(block_of), batch_size)]
    blocks_per_batch = float(np.mean([len(np.unique(batch)) for batch in batches])) if batches else 0.0
    known = [labels[index] for index in order]
    pairs = [(a, b) for a, b in zip(known, known[1:]) if a is not None and b is not None]
    same_next = float(np.mean([a == b for a, b in pairs])) if pairs else float("nan")
    present = [label for label in known if label is not None]
    if present:
        _, counts = np.unique(np.asarray(present, dtype=np.float64), return_counts=True)
        expected = float(((counts / counts.sum()) ** 2).sum())
    else:
        expected = float("nan")
    return {"blocks_per_batch": blocks_per_batch, "same_label_next": same_next, "same_label_expected": expected}
