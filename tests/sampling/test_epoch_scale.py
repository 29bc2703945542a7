"""The design that keeps an epoch of any size at constant cost per sample: the order computed, not
stored; the delivery record a few ranges however far into the epoch; a checkpoint's size set by
what is out of order, not by what was delivered. Asserted on the data structures at 10^5 and
10^7 samples (and the order's memory at 10^9), never on the clock."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from stoker.sampling import IndexPermutation, PositionSet, Sampler


def deliver(sampler: Sampler, count: int, batch: int = 4096, swap_every: int = 3) -> None:
    """Mark ``count`` of the plan delivered a batch at a time, every ``swap_every``-th pair of
    batches out of order (as out-of-order delivery does)."""
    plan = sampler.plan_arrays()
    starts = list(range(0, min(count, plan.size), batch))
    for at in range(0, len(starts) - 1, swap_every):
        starts[at], starts[at + 1] = starts[at + 1], starts[at]
    for start in starts:
        part = plan.part(start, min(start + batch, count))
        sampler.mark_delivered(part.positions, part.padding)


@pytest.mark.parametrize("world_size", [1, 4])
@pytest.mark.parametrize("shuffle", [False, True])
def test_the_delivery_record_and_the_state_do_not_grow_with_the_epoch(world_size: int, shuffle: bool) -> None:
    sizes = {}
    for samples in (10**5, 10**7):
        sampler = Sampler(samples, shuffle=shuffle, seed=3, rank=world_size - 1, world_size=world_size)
        deliver(sampler, sampler.plan_arrays().size * 9 // 10)
        # With a batch held back (read ahead, not yet handed on): the record has a hole.
        plan = sampler.plan_arrays()
        held = plan.part(0, 256)
        sampler.mark_delivered(held.positions, held.padding)
        state = sampler.state_dict(holding=[(held.positions, held.padding)])
        sizes[samples] = (sampler.record_size, len(json.dumps(state)))
        assert sampler.delivered == len(PositionSet(tuple(span) for span in state["delivered"])) + 256, "the held batch is left out"
    (small_ranges, small_bytes), (large_ranges, large_bytes) = sizes[10**5], sizes[10**7]
    assert large_ranges == small_ranges <= 2, sizes
    assert large_bytes <= small_bytes + 16 and large_bytes < 1024, sizes  # a few more digits, nothing more


def test_the_order_and_the_plan_hold_no_array_per_sample() -> None:
    tracemalloc.start()
    try:
        sampler = Sampler(10**9, shuffle=True, seed=1, rank=3, world_size=8)
        plan = sampler.plan_arrays()
        batch = plan.part(10**8, 10**8 + 256)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak:,} bytes for a plan over a billion samples"
    assert plan.size == 10**9 // 8 and len(np.unique(batch.indices)) == 256
    assert ((batch.positions - 3) % 8 == 0).all(), "rank 3 of 8 takes positions 3, 11, 19..."


@pytest.mark.parametrize("size", [1, 2, 3, 5, 17, 1000, 4097, 65_537])
def test_the_computed_order_is_a_permutation(size: int) -> None:
    for epoch in range(3):
        order = IndexPermutation(size, seed=9, epoch=epoch)(np.arange(size))
        assert np.array_equal(np.sort(order), np.arange(size))


def test_the_computed_order_is_uniform_enough() -> None:
    # Where each of 10 samples lands, over 4,000 seeds: every (sample, position) pair about 400 times.
    counts = np.zeros((10, 10))
    for seed in range(4000):
        counts[np.arange(10), IndexPermutation(10, seed=seed, epoch=0)(np.arange(10))] += 1
    assert counts.min() > 320 and counts.max() < 480, counts
    # Epochs and seeds give different orders; the same pair gives the same one.
    first = IndexPermutation(10**6, seed=1, epoch=0)(np.arange(1000))
    assert np.array_equal(first, IndexPermutation(10**6, seed=1, epoch=0)(np.arange(1000)))
    assert not np.array_equal(first, IndexPermutation(10**6, seed=1, epoch=1)(np.arange(1000)))
    assert not np.array_equal(first, IndexPermutation(10**6, seed=2, epoch=0)(np.arange(1000)))
    # Neighbours in the order are not neighbours in the storage.
    steps = np.abs(np.diff(IndexPermutation(10**6, seed=1, epoch=0)(np.arange(100_000))))
    assert np.median(steps) > 10**5


@pytest.mark.parametrize("old_world, new_world", [(4, 3), (3, 5), (8, 1)])
def test_an_elastic_resume_at_ten_million_delivers_the_rest_once(old_world: int, new_world: int) -> None:
    samples = 10**7
    states = []
    for rank in range(old_world):
        sampler = Sampler(samples, shuffle=True, seed=5, rank=rank, world_size=old_world)
        deliver(sampler, 2_000_000 // old_world + rank * 100)  # ranks a little apart, as in flight
        states.append(sampler.state_dict())
    delivered_before = sum(len(PositionSet(tuple(span) for span in state["delivered"])) for state in states)
    counts = np.zeros(samples, np.int8)
    for state, rank in zip(states, range(old_world)):
        sampler = Sampler(samples, shuffle=True, seed=5, rank=rank, world_size=old_world)
        sampler.load_state_dict(state)
        np.add.at(counts, sampler.delivered_positions(), 1)
    for rank in range(new_world):
        sampler = Sampler(samples, shuffle=True, seed=5, rank=rank, world_size=new_world, pad=False)
        sampler.load_state_dict(states)
        # Merged, the old world's record is a range for what every rank delivered and one entry
        # per slot some ranks delivered and others not (their skew: what was in flight).
        skew = sum(rank * 100 for rank in range(old_world))
        assert sampler.record_size <= skew + 4
        plan = sampler.plan_arrays()
        for start in range(0, plan.size, 1 << 20):
            part = plan.part(start, start + (1 << 20))
            counts[part.positions[~part.padding]] += 1
    left_out = samples - delivered_before
    assert counts.max() == 1, "no position twice"
    assert (counts == 0).sum() == left_out % new_world, "only the tail that does not divide evenly (pad=False)"
