"""The block look-ahead asks for each block once, in the order of first use, ``ahead`` samples
before its first sample is requested."""

from __future__ import annotations

import numpy as np
import pytest

from stoker.sampling import BlockLookahead, block_order
from stoker.sampling._block_order import block_starts

SIZES = [7, 3, 12, 5, 9, 1, 6, 8]


def first_use(order: np.ndarray) -> dict[int, int]:
    """Each block's first position in ``order``."""
    blocks = np.searchsorted(block_starts(SIZES), order, side="right") - 1
    seen: dict[int, int] = {}
    for position, block in enumerate(blocks.tolist()):
        seen.setdefault(block, position)
    return seen


@pytest.mark.parametrize("ahead", [0, 5, 20, 1000])
def test_each_block_is_asked_for_once_before_its_first_sample(ahead: int) -> None:
    order = block_order(SIZES, seed=3, epoch=1, window=2, ranks=1)
    uses = first_use(order)
    asked: list[int] = []
    lookahead = BlockLookahead(order, SIZES, ahead, asked.extend)
    for stop in range(4, len(order) + 4, 4):  # a batch of 4 at a time, as the prefetcher takes them
        stop = min(stop, len(order))
        lookahead.requested(stop)
        assert set(asked) == {block for block, position in uses.items() if position < stop + ahead}
    assert asked == sorted(uses, key=uses.__getitem__), "each block once, in the order of first use"


def test_a_rank_asks_only_for_its_own_blocks() -> None:
    order = block_order(SIZES, seed=0, epoch=0, window=2, ranks=2)[1::2]  # rank 1's positions
    asked: list[int] = []
    BlockLookahead(order, SIZES, 10_000, asked.extend).requested(1)
    assert sorted(asked) == sorted(first_use(order)) and len(asked) < len(SIZES)


def test_a_negative_look_ahead_is_refused() -> None:
    with pytest.raises(ValueError, match="ahead"):
        BlockLookahead(np.arange(5), [5], -1, print)
