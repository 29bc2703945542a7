"""Buckets of shape and the bucketed order: each rank's every batch one bucket's, equal steps on
every rank, no sample twice, leftovers counted, exact resume, and bucket shapes as SDXL's scheme
makes them."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigurationError, ProvenanceError
from stoker.sampling import BucketOrder, Buckets, Sampler


def test_the_pixel_budget_scheme_gives_sdxls_shapes() -> None:
    buckets = Buckets.from_budget(1024 * 1024, multiple=64, max_aspect=4.0)
    for height, width in buckets.shapes:
        assert height % 64 == 0 and width % 64 == 0
        assert height * width <= 1024 * 1024 and max(height / width, width / height) <= 4.0
        assert (width, height) in buckets.shapes, "tall and wide alike"
    for shape in [(1024, 1024), (1344, 768), (768, 1344), (1536, 640), (640, 1536)]:  # SDXL's published buckets
        assert shape in buckets.shapes


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4096), st.integers(1, 4096)), min_size=1, max_size=40),
    st.lists(st.tuples(st.integers(1, 64), st.integers(1, 64)), min_size=1, max_size=12, unique=True),
)
def test_each_sample_goes_to_the_bucket_nearest_its_aspect_ratio(sizes: list[tuple[int, int]], shapes: list[tuple[int, int]]) -> None:
    buckets = Buckets([(height * 16, width * 16) for height, width in shapes])
    widths, heights = np.array([w for w, _ in sizes]), np.array([h for _, h in sizes])
    chosen = buckets.assign(widths, heights)
    ratios = np.log(buckets.aspect_ratios())
    for width, height, bucket in zip(widths, heights, chosen):
        distance = np.abs(ratios - np.log(width / height))
        assert distance[bucket] <= distance.min() + 1e-12


def test_unknown_sizes_go_to_no_bucket_and_the_kept_area_is_measured() -> None:
    buckets = Buckets([(512, 512), (512, 1024)])
    chosen = buckets.assign(np.array([1000, 0, 2000]), np.array([1000, 700, 1000]))
    assert list(chosen) == [0, -1, 1]
    kept = buckets.kept_area(np.array([1000, 0, 2000]), np.array([1000, 700, 1000]), chosen)
    assert kept[0] == pytest.approx(1.0) and np.isnan(kept[1]) and kept[2] == pytest.approx(1.0)
    assert buckets.kept_area(np.array([1920]), np.array([1080]), np.array([0]))[0] == pytest.approx(1080 / 1920)  # a 16:9 photo in a square


def _epoch(sampler: Sampler, batch_size: int) -> list[np.ndarray]:
    plan = sampler.plan_arrays()
    indices = plan.part(0, plan.size).indices
    return [indices[start : start + batch_size] for start in range(0, len(indices), batch_size)]


@pytest.mark.parametrize("world", [1, 3])
def test_every_batch_of_every_rank_is_one_buckets_and_ranks_take_equal_steps(world: int) -> None:
    rng = np.random.default_rng(1)
    bucket_of = rng.integers(-1, 9, 5003).astype(np.int16)
    batch = 16
    steps, seen = [], Counter[int]()
    for rank in range(world):
        sampler = Sampler(len(bucket_of), seed=7, rank=rank, world_size=world, buckets=(bucket_of, 9), batch_size=batch)
        sampler.set_epoch(2)
        batches = _epoch(sampler, batch)
        steps.append(len(batches))
        for indices in batches:
            assert len(indices) == batch and len(set(bucket_of[indices])) == 1 and bucket_of[indices[0]] >= 0
            seen.update(indices.tolist())
    assert len(set(steps)) == 1, f"steps per rank: {steps}"
    assert max(seen.values()) == 1, "no sample twice in an epoch"
    order = BucketOrder(bucket_of, 9, batch_size=batch, seed=7, epoch=2, ranks=world)
    assert sum(seen.values()) == order.length
    assert int(order.leftovers().sum()) + int((bucket_of < 0).sum()) == len(bucket_of) - order.length
    assert (order.leftovers() < batch * (1 + world)).all(), "at most a partial batch and a share of the dealing's remainder"


def test_the_order_is_a_permutation_fixed_by_seed_and_epoch() -> None:
    bucket_of = np.random.default_rng(2).integers(0, 5, 2000).astype(np.int16)
    first = BucketOrder(bucket_of, 5, batch_size=8, seed=3, epoch=0, ranks=2)(np.arange(2000))
    assert sorted(first.tolist()) == list(range(2000))
    assert (BucketOrder(bucket_of, 5, batch_size=8, seed=3, epoch=0, ranks=2)(np.arange(2000)) == first).all()
    assert (BucketOrder(bucket_of, 5, batch_size=8, seed=3, epoch=1, ranks=2)(np.arange(2000)) != first).mean() > 0.9


def test_a_resume_mid_epoch_continues_with_the_same_batches() -> None:
    bucket_of = np.random.default_rng(4).integers(0, 6, 3000).astype(np.int16)
    options = {"seed": 11, "rank": 1, "world_size": 2, "buckets": (bucket_of, 6), "batch_size": 12}
    whole = Sampler(3000, **options)  # type: ignore[arg-type]
    whole.set_epoch(5)
    plan = whole.plan_arrays()
    done = plan.part(0, 12 * 7)
    whole.mark_delivered(done.positions, done.padding)
    state = whole.state_dict()
    resumed = Sampler(3000, **options)  # type: ignore[arg-type]
    resumed.load_state_dict(state)
    rest = resumed.plan_arrays()
    assert (rest.part(0, rest.size).indices == plan.part(12 * 7, plan.size).indices).all()
    other = Sampler(3000, **{**options, "batch_size": 13})  # type: ignore[arg-type]
    with pytest.raises(ProvenanceError, match="other buckets or another batch size"):
        other.load_state_dict(state)
    with pytest.raises(ConfigurationError, match="expected the states of ranks 0..1"):
        Sampler(3000, **{**options, "rank": 0, "world_size": 3}).load_state_dict([state, state])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("shapes", "message"),
    [([], "no buckets"), ([(512, 0)], "whole numbers"), ([(512, 512), (512, 512)], "twice"), ([(512,)], "pair")],
)
def test_bucket_lists_that_cannot_work_are_refused(shapes: list[tuple[int, int]], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Buckets(shapes)


def test_buckets_without_a_full_batch_for_each_rank_are_named() -> None:
    with pytest.raises(ConfigurationError, match="no bucket holds a full batch of 64 for each of 4 ranks"):
        BucketOrder(np.zeros(100, np.int16), 1, batch_size=64, seed=0, epoch=0, ranks=4)


@pytest.mark.parametrize("world", [1, 3])
def test_carried_leftovers_are_read_first_thing_next_epoch_and_every_sample_once_a_pass(world: int) -> None:
    rng = np.random.default_rng(6)
    bucket_of = rng.integers(-1, 7, 1500).astype(np.int16)
    batch, epochs = 8, 6
    sizes = np.bincount(bucket_of[bucket_of >= 0], minlength=7)
    reads = np.zeros(len(bucket_of), dtype=np.int64)
    previous_carried: set[int] = set()
    for epoch in range(epochs):
        steps, read = [], Counter[int]()
        for rank in range(world):
            sampler = Sampler(
                len(bucket_of), seed=9, rank=rank, world_size=world, buckets=(bucket_of, 7), batch_size=batch, leftovers="carry"
            )
            sampler.set_epoch(epoch)
            batches = _epoch(sampler, batch)
            steps.append(len(batches))
            for indices in batches:
                assert len(indices) == batch and len(set(bucket_of[indices])) == 1
                read.update(indices.tolist())
        assert len(set(steps)) == 1, f"epoch {epoch}: steps per rank {steps}"
        assert previous_carried <= set(read), f"epoch {epoch} does not read what epoch {epoch - 1} carried"
        assert max(read.values()) <= 2, "a carried sample may come again in its own pass, no more"
        order = BucketOrder(bucket_of, 7, batch_size=batch, seed=9, epoch=epoch, ranks=world, leftovers="carry")
        previous_carried = set(order.carried().tolist())
        assert len(previous_carried) == int(order.leftovers().sum()) < 7 * 2 * batch + batch * world
        for index, count in read.items():
            reads[index] += count
    assert reads[bucket_of < 0].sum() == 0, "samples of no bucket are never read"
    for number in range(7):
        members = reads[bucket_of == number]
        # Each bucket's stream read up to where epoch 5 ended: every member once a pass, the
        # members of the unfinished pass once more.
        assert members.max() - members.min() <= 1, f"bucket {number}: reads {sorted(set(members.tolist()))}"
        assert members.min() >= epochs - 2 and members.sum() <= epochs * sizes[number]


def test_the_dropping_order_reads_a_sample_skipped_in_one_epoch_only_by_chance_later() -> None:
    bucket_of = np.zeros(100, dtype=np.int16)
    dropped = BucketOrder(bucket_of, 1, batch_size=30, seed=1, epoch=0, ranks=1)
    carried = BucketOrder(bucket_of, 1, batch_size=30, seed=1, epoch=0, ranks=1, leftovers="carry")
    assert dropped.leftovers().tolist() == carried.leftovers().tolist() == [10]
    assert len(dropped.carried()) == 0 and len(carried.carried()) == 10
    assert (dropped(np.arange(90)) == carried(np.arange(90))).all(), "epoch 0 reads the same under both policies"
    second = BucketOrder(bucket_of, 1, batch_size=30, seed=1, epoch=1, ranks=1, leftovers="carry")
    assert second.length == 90 and set(carried.carried().tolist()) <= set(second(np.arange(90)).tolist())
    third = BucketOrder(bucket_of, 1, batch_size=30, seed=1, epoch=2, ranks=1, leftovers="carry")
    assert third.length == 120, "the carried 20 fill a fourth batch"
    with pytest.raises(ConfigurationError, match="leftovers must be one of"):
        BucketOrder(bucket_of, 1, batch_size=30, seed=1, epoch=0, ranks=1, leftovers="keep")
