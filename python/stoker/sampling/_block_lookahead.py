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
from typing import Any

import numpy as np

from ..errors import ConfigurationError
from ._block_order import block_starts

__all__ = ["BlockLookahead"]


class BlockLookahead:
    """Tells the storage which blocks will be wanted soon, in the order they will be wanted.

    Args:
        indices: This rank's storage indices in the order they will be requested: an array, or
            a plan (`EpochPlan`) read as far as requests have got, never whole.
        block_sizes: Samples per block, in storage order (`Storage.block_sizes`).
        ahead: How many samples before its first sample each block is asked for.
        prefetch: Starts reading the given block numbers without waiting
            (`Storage.prefetch_blocks`).
    """

    def __init__(self, indices: np.ndarray | Any, block_sizes: Sequence[int], ahead: int, prefetch: Callable[[list[int]], None]) -> None:
        if ahead < 0:
            raise ConfigurationError(f"ahead must be at least 0, got {ahead}")
        self._starts = block_starts(block_sizes)
        if hasattr(indices, "part"):
            self._size = int(indices.size)
            self._indices_of: Callable[[int, int], np.ndarray] = lambda start, stop: indices.part(start, stop).indices
        else:
            array = np.asarray(indices, np.int64)
            self._size = len(array)
            self._indices_of = lambda start, stop: array[start:stop]
        self.ahead = ahead
        self._prefetch = prefetch
        self._seen: set[int] = set()  # blocks asked for (memory in blocks, not samples)
        self._scanned = 0  # entries of the order whose blocks were asked for
        self.asked = 0  # blocks asked for so far, in order of first use

    def requested(self, stop: int) -> None:
        """Samples up to position ``stop`` (exclusive) of the order have been requested: ask for
        every block first used before ``stop + ahead`` that was not asked for yet."""
        end = min(self._size, stop + self.ahead)
        if end <= self._scanned:
            return
        blocks = np.searchsorted(self._starts, self._indices_of(self._scanned, end), side="right") - 1
        self._scanned = end
        found, first = np.unique(blocks, return_index=True)
        numbers = [number for number in found[np.argsort(first, kind="stable")].tolist() if number not in self._seen]
        if numbers:
            self._seen.update(numbers)
            self.asked += len(numbers)
            self._prefetch(numbers)
