"""Block look-ahead: a block-streaming storage is asked for each block a while before the first
of its samples is due, so the training step does not wait on the block's round trip.

The block shuffle (`block_order`) takes a rank's blocks a window at a time, so all of a window's
blocks are first asked for within a batch or two of the window's start. Fetched only then, each
window opens with a stall: the round trip plus the megabytes of every block, which on a 150 ms
store with a slow connection in ten is most of a second, several times an epoch. The order is
known in advance (it is drawn from seed and epoch), so each block is asked for ``ahead`` samples
before its first sample; with ``ahead`` half a window, the next window's blocks arrive while the
last one's samples are still served. The storage's block cache holds two windows for this
(`Storage.max_open_blocks` is half of it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ._block_order import block_starts

__all__ = ["BlockLookahead"]


class BlockLookahead:
    """Tells the storage which blocks will be wanted soon, in the order they will be wanted.

    Args:
        indices: This rank's storage indices in the order they will be requested.
        block_sizes: Samples per block, in storage order (`Storage.block_sizes`).
        ahead: How many samples before its first sample each block is asked for.
        prefetch: Starts reading the given block numbers without waiting
            (`Storage.prefetch_blocks`).
    """

    def __init__(self, indices: np.ndarray, block_sizes: Sequence[int], ahead: int, prefetch: Callable[[list[int]], None]) -> None:
        if ahead < 0:
            raise ValueError(f"ahead must be at least 0, got {ahead}")
        blocks = np.searchsorted(block_starts(block_sizes), np.asarray(indices, np.int64), side="right") - 1
        numbers, first = np.unique(blocks, return_index=True)
        by_first_use = np.argsort(first, kind="stable")
        self._blocks = numbers[by_first_use]
        self._first_use = first[by_first_use]
        self.ahead = ahead
        self._prefetch = prefetch
        self.asked = 0  # blocks asked for so far, in order of first use

    def requested(self, stop: int) -> None:
        """Samples up to position ``stop`` (exclusive) of the order have been requested: ask for
        every block first used before ``stop + ahead`` that was not asked for yet."""
        end = int(np.searchsorted(self._first_use, stop + self.ahead, side="left"))
        if end > self.asked:
            numbers = self._blocks[self.asked : end].tolist()
            self.asked = end
            self._prefetch(numbers)
