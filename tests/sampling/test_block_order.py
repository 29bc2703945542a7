"""The block shuffle: a permutation per epoch, ranks inside their own blocks, exact and elastic
resume, and shuffle quality measured against a uniform shuffle."""

from __future__ import annotations

import numpy as np
import pytest

from stoker.sampling import Sampler, block_order, shuffle_quality

UNEVEN = [7, 30, 1, 12, 40, 5, 5, 22, 9, 16, 3, 50]


def block_of(blocks: list[int]) -> np.ndarray:
    return np.repeat(np.arange(len(blocks)), blocks)


def delivered_by_rank(blocks: list[int], world_size: int, *, pad: bool, window: int, epoch: int = 0) -> list[list[int]]:
    shares = []
    for rank in range(world_size):
        sampler = Sampler(sum(blocks), blocks=blocks, window=window, rank=rank, world_size=world_size, seed=5, pad=pad)
        sampler.set_epoch(epoch)
        shares.append([plan.index for plan in sampler if not plan.padding])
    return shares


@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
@pytest.mark.parametrize("window", [1, 3, 100])
def test_every_sample_exactly_once_per_epoch_for_any_world_and_window(world_size: int, window: int) -> None:
    for epoch in (0, 1):
        shares = delivered_by_rank(UNEVEN, world_size, pad=True, window=window, epoch=epoch)
        assert sorted(index for share in shares for index in share) == list(range(sum(UNEVEN)))
    dropped = delivered_by_rank(UNEVEN, world_size, pad=False, window=window)
    flat = [index for share in dropped for index in share]
    assert len(flat) == len(set(flat)) == (sum(UNEVEN) // world_size) * world_size


def test_the_order_depends_on_seed_and_epoch_only() -> None:
    first = block_order(UNEVEN, seed=1, epoch=0, window=2, ranks=2)
    assert np.array_equal(first, block_order(UNEVEN, seed=1, epoch=0, window=2, ranks=2))
    assert not np.array_equal(first, block_order(UNEVEN, seed=1, epoch=1, window=2, ranks=2))
    assert not np.array_equal(first, block_order(UNEVEN, seed=2, epoch=0, window=2, ranks=2))


def test_each_rank_stays_inside_a_window_of_its_own_blocks() -> None:
    blocks = [100] * 24
    shares = delivered_by_rank(blocks, 2, pad=True, window=3)
    owner = block_of(blocks)
    touched = [set(owner[share].tolist()) for share in shares]
    assert not touched[0] & touched[1], "the two ranks read disjoint blocks"
    for share in shares:
        for first in range(0, len(share), 32):
            batch_blocks = set(owner[share[first : first + 32]].tolist())
            assert len(batch_blocks) <= 6, "a batch draws from at most two windows of 3 blocks"
        # the samples of a window come together: each block is read during one stretch only
        spans = {block: [] for block in set(owner[share].tolist())}
        for position, index in enumerate(share):
            spans[int(owner[index])].append(position)
        assert all(max(positions) - min(positions) < 300 for positions in spans.values())


def test_resume_mid_epoch_neither_repeats_nor_skips() -> None:
    sampler = Sampler(sum(UNEVEN), blocks=UNEVEN, window=2, seed=9)
    plan = sampler.plan()
    sampler.mark_delivered([p.position for p in plan[:70:2]], [False] * 35)  # out of order
    resumed = Sampler(sum(UNEVEN), blocks=UNEVEN, window=2, seed=9)
    resumed.load_state_dict(sampler.state_dict())
    rest = [p.index for p in resumed]
    done = [p.index for p in plan[:70:2]]
    assert sorted(rest + done) == list(range(sum(UNEVEN)))
    assert rest == [p.index for p in plan if p.index not in set(done)], "the rest in the same order"


def test_elastic_resume_deals_the_rest_of_the_same_order_over_a_new_world() -> None:
    total = sum(UNEVEN)
    old = [Sampler(total, blocks=UNEVEN, window=2, seed=4, rank=rank, world_size=2) for rank in range(2)]
    done: list[int] = []
    for sampler, count in zip(old, (20, 33)):
        plan = sampler.plan()[:count]
        sampler.mark_delivered([p.position for p in plan], [p.padding for p in plan])
        done += [p.index for p in plan if not p.padding]
    states = [sampler.state_dict() for sampler in old]
    new = [Sampler(total, blocks=UNEVEN, window=2, seed=4, rank=rank, world_size=3) for rank in range(3)]
    for sampler in new:
        sampler.load_state_dict(states)
    rest = [p.index for sampler in new for p in sampler if not p.padding]
    assert sorted(done + rest) == list(range(total))


def test_a_state_from_another_scheme_or_layout_is_refused() -> None:
    uniform = Sampler(sum(UNEVEN), seed=1).state_dict()
    with pytest.raises(ValueError, match="uniform shuffle"):
        Sampler(sum(UNEVEN), blocks=UNEVEN, seed=1).load_state_dict(uniform)
    block_state = Sampler(sum(UNEVEN), blocks=UNEVEN, window=2, seed=1).state_dict()
    with pytest.raises(ValueError, match="block layout or window"):
        Sampler(sum(UNEVEN), blocks=UNEVEN, window=3, seed=1).load_state_dict(block_state)
    with pytest.raises(ValueError, match="block layout or window"):
        Sampler(sum(UNEVEN), blocks=list(reversed(UNEVEN)), window=2, seed=1).load_state_dict(block_state)
    with pytest.raises(ValueError, match="hold"):
        Sampler(sum(UNEVEN) + 1, blocks=UNEVEN)
    with pytest.raises(ValueError, match="at least one sample"):
        Sampler(3, blocks=[3, 0])


def test_shuffle_quality_shows_what_the_block_shuffle_costs() -> None:
    blocks = [200] * 50
    labels = block_of(blocks).tolist()  # each block one class: the worst case for locality
    uniform = Sampler(sum(blocks), seed=0).order()
    blocked = Sampler(sum(blocks), blocks=blocks, window=4, seed=0).order()
    uniform_quality = shuffle_quality(uniform, blocks, labels, batch_size=64)
    block_quality = shuffle_quality(blocked, blocks, labels, batch_size=64)
    assert block_quality["blocks_per_batch"] <= 8 < uniform_quality["blocks_per_batch"]
    assert uniform_quality["same_label_expected"] == pytest.approx(1 / 50)
    assert uniform_quality["same_label_next"] == pytest.approx(1 / 50, abs=0.01)
    assert block_quality["same_label_next"] > 0.15, "about 1 in 4 with 4 blocks of one class mixed"
    wider = shuffle_quality(Sampler(sum(blocks), blocks=blocks, window=16, seed=0).order(), blocks, labels, batch_size=64)
    assert wider["same_label_next"] < block_quality["same_label_next"], "a wider window mixes better"
