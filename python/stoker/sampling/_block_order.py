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
uniform shuffle. `shuffle_quality` puts numbers on what this costs against a uniform shuffle.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

__all__ = ["block_order", "block_starts", "shuffle_quality"]

_BLOCK_STREAM = 0x626C6F636B  # "block": keeps this scheme's draws apart from the uniform shuffle's


def block_starts(block_sizes: Sequence[int]) -> np.ndarray:
    """The first storage index of each block, plus the total at the end.

    Raises:
        ValueError: A block of no samples or a negative size.
    """
    sizes = np.asarray(block_sizes, dtype=np.int64)
    if len(sizes) == 0 or (sizes <= 0).any():
        raise ValueError(f"blocks must hold at least one sample each, got sizes {sizes[:10].tolist()}")
    return np.concatenate([[0], np.cumsum(sizes)])


def block_order(block_sizes: Sequence[int], *, seed: int, epoch: int, window: int, ranks: int) -> np.ndarray:
    """The epoch's order (storage indices by position) under the block shuffle.

    Args:
        block_sizes: Samples in each block, in storage order (they cover every sample).
        seed: Seeds the order, with the epoch.
        epoch: The epoch whose order this is.
        window: Blocks whose samples are shuffled together, per rank.
        ranks: The world size the order is laid out for.

    Raises:
        ValueError: An empty block, or ``window`` or ``ranks`` below 1.
    """
    if window < 1 or ranks < 1:
        raise ValueError(f"window and ranks must be positive, got window={window}, ranks={ranks}")
    starts = block_starts(block_sizes)
    sizes = np.diff(starts)
    generator = np.random.default_rng([seed, epoch, _BLOCK_STREAM])
    dealt: list[list[int]] = [[] for _ in range(ranks)]
    load = [(0, rank) for rank in range(ranks)]  # (samples so far, rank): the lightest first
    for block in generator.permutation(len(sizes)):
        held, rank = heapq.heappop(load)
        dealt[rank].append(int(block))
        heapq.heappush(load, (held + int(sizes[block]), rank))
    sequences = []
    for blocks in dealt:
        parts = []
        for first in range(0, len(blocks), window):
            group = blocks[first : first + window]
            indices = np.concatenate([np.arange(starts[block], starts[block + 1]) for block in group])
            parts.append(generator.permutation(indices))
        sequences.append(np.concatenate(parts) if parts else np.zeros(0, np.int64))
    common = min(len(sequence) for sequence in sequences)
    interleaved = np.stack([sequence[:common] for sequence in sequences], axis=1).reshape(-1)
    return np.concatenate([interleaved, *(sequence[common:] for sequence in sequences)]).astype(np.int64)


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
