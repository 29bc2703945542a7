"""A bucketed epoch continued on other world sizes (`WholeBatchPlan`): whatever the worlds, the
steps at which each is stopped, and ranks stopped a batch apart (what was in flight), every batch
of every rank is one bucket's and full, the ranks of each world take equal steps, and over all the
runs every sample of the epoch is delivered exactly once (padding flagged apart), also when a rank
of a new world resumes again from its own state."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigurationError
from stoker.sampling import EpochPlan, PositionSet, Sampler
from stoker.sampling._whole_batch_plan import WholeBatchPlan, batches_of_positions, positions_of_batches

BUCKETS = 5


def sampler(bucket_of: np.ndarray, rank: int, world: int, batch: int, leftovers: str, epoch: int) -> Sampler:
    made = Sampler(len(bucket_of), seed=3, rank=rank, world_size=world, buckets=(bucket_of, BUCKETS), batch_size=batch, leftovers=leftovers)
    made.set_epoch(epoch)
    return made


def run(samplers: list[Sampler], batch: int, steps: list[int | None], bucket_of: np.ndarray) -> tuple[list[int], list[int]]:
    """Each rank delivers ``steps[rank]`` batches (None: to the epoch's end): (the steps each
    took, the positions delivered). Every batch is checked to be one bucket's and full."""
    taken, positions = [], []
    for sampler, limit in zip(samplers, steps):
        plan = sampler.plan_arrays()
        count = plan.size // batch if limit is None else min(limit, plan.size // batch)
        assert plan.size % batch == 0, "whole batches"
        for number in range(count):
            part = plan.part(number * batch, (number + 1) * batch)
            assert len(set(bucket_of[part.indices].tolist())) == 1 and bucket_of[part.indices[0]] >= 0
            sampler.mark_delivered(part.positions, part.padding)
            positions += part.positions[~part.padding].tolist()
        taken.append(count)
    return taken, positions


@settings(max_examples=60, deadline=None)
@given(
    worlds=st.lists(st.integers(1, 5), min_size=2, max_size=4),
    stops=st.lists(st.integers(0, 6), min_size=3, max_size=3),
    apart=st.booleans(),
    reload=st.booleans(),
    batch=st.integers(1, 6),
    leftovers=st.sampled_from(["drop", "carry"]),
    epoch=st.integers(0, 3),
    seed=st.integers(0, 1000),
)
def test_any_sequence_of_worlds_delivers_each_sample_of_the_epoch_once_in_whole_batches(
    worlds: list[int], stops: list[int], apart: bool, reload: bool, batch: int, leftovers: str, epoch: int, seed: int
) -> None:
    bucket_of = np.random.default_rng(seed).integers(-1, BUCKETS, 400).astype(np.int16)
    samplers = [sampler(bucket_of, rank, worlds[0], batch, leftovers, epoch) for rank in range(worlds[0])]
    length = samplers[0].epoch_length
    delivered: Counter[int] = Counter()
    for number, world in enumerate(worlds):
        last = number == len(worlds) - 1
        # Stopped at a step, odd ranks a batch further with ``apart`` (their batch was in flight).
        limits = [None if last else stops[number] + (apart and rank % 2) for rank in range(world)]
        steps, positions = run(samplers, batch, limits, bucket_of)
        delivered.update(positions)
        if last:
            assert len(set(steps)) == 1, f"equal steps on every rank of the last world: {steps}"
        else:
            states = [each.state_dict() for each in samplers]
            samplers = [sampler(bucket_of, rank, worlds[number + 1], batch, leftovers, epoch) for rank in range(worlds[number + 1])]
            for each in samplers:
                each.load_state_dict(states)
            assert all(each.epoch_length == length for each in samplers)
            if reload:  # and a rank of the new world stopped and resumed from its own state, exactly
                steps, positions = run(samplers, batch, [1] * len(samplers), bucket_of)
                delivered.update(positions)
                own = [each.state_dict() for each in samplers]
                samplers = [sampler(bucket_of, rank, len(own), batch, leftovers, epoch) for rank in range(len(own))]
                for each, state in zip(samplers, own):
                    each.load_state_dict(state)
    assert max(delivered.values()) == 1, "no sample twice"
    assert sorted(delivered) == list(range(length)), f"{length - len(delivered)} positions of the epoch never delivered"


def test_on_the_world_it_began_on_the_dealing_is_the_plain_one() -> None:
    bucket_of = np.random.default_rng(5).integers(0, BUCKETS, 900).astype(np.int16)
    for rank in range(3):
        plain = sampler(bucket_of, rank, 3, 4, "drop", 1).plan_arrays()
        assert isinstance(plain, EpochPlan) and not isinstance(plain, WholeBatchPlan)
        whole = WholeBatchPlan(
            plain._order,
            num_samples=plain.remaining,
            rank=rank,
            world_size=3,
            excluded=None,
            delivered=PositionSet(),
            padding_delivered=0,
            batch_size=4,
            order_ranks=3,
        )
        assert (whole.positions == plain.positions).all() and (whole.indices == plain.indices).all()
        assert (whole.slots_of(whole.positions) == np.arange(whole.size)).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 59), max_size=30), st.integers(1, 5), st.integers(1, 5))
def test_batches_and_their_positions_convert_both_ways(batches: list[int], ranks: int, batch: int) -> None:
    chosen = PositionSet(list(zip(batches, [each + 1 for each in batches])))
    positions = positions_of_batches(chosen, order_ranks=ranks, batch_size=batch)
    assert len(positions) == len(chosen) * batch
    assert batches_of_positions(positions, order_ranks=ranks, batch_size=batch).ranges() == chosen.ranges()


def test_a_state_holding_part_of_a_batch_is_refused_by_name() -> None:
    bucket_of = np.random.default_rng(6).integers(0, BUCKETS, 600).astype(np.int16)
    first = [sampler(bucket_of, rank, 2, 4, "drop", 0) for rank in range(2)]
    run(first, 4, [3, 3], bucket_of)
    states = [each.state_dict() for each in first]
    later = [sampler(bucket_of, rank, 3, 4, "drop", 0) for rank in range(3)]
    for each in later:
        each.load_state_dict(states)
    run(later, 4, [1, 1, 1], bucket_of)
    saved = later[0].state_dict()
    assert saved["excluded"], "the first world's batches are carried as positions done"
    damaged = {**saved, "excluded": [[start, end - 1] for start, end in saved["excluded"]]}
    with pytest.raises(ConfigurationError, match="part of a batch"):
        sampler(bucket_of, 0, 3, 4, "drop", 0).load_state_dict(damaged)
    beyond = {**saved, "excluded": [[0, 599]]}
    with pytest.raises(ConfigurationError, match="reaches past"):
        sampler(bucket_of, 0, 3, 4, "drop", 0).load_state_dict(beyond)
    torn = [{**state, "delivered": [[0, 3]]} for state in (each.state_dict() for each in later)]
    with pytest.raises(ConfigurationError, match="part of a batch"):
        sampler(bucket_of, 0, 2, 4, "drop", 0).load_state_dict(torn)
