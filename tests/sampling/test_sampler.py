"""The sampler: deterministic order, disjoint and complete rank shares, equal counts."""

from __future__ import annotations

import pytest

from stoker.sampling import PositionSet, Sampler


def test_same_seed_same_order_and_epochs_differ() -> None:
    first = [plan.index for plan in Sampler(1000, seed=3)]
    assert first == [plan.index for plan in Sampler(1000, seed=3)]
    assert sorted(first) == list(range(1000))
    other_seed = [plan.index for plan in Sampler(1000, seed=4)]
    assert other_seed != first
    sampler = Sampler(1000, seed=3)
    sampler.set_epoch(1)
    assert [plan.index for plan in sampler] != first
    assert [plan.index for plan in Sampler(10, shuffle=False)] == list(range(10))


@pytest.mark.parametrize("num_samples, world_size", [(100, 4), (101, 4), (7, 3), (5, 8)])
def test_rank_shares_are_disjoint_complete_and_equal(num_samples: int, world_size: int) -> None:
    padded = [list(Sampler(num_samples, world_size=world_size, rank=rank, seed=1)) for rank in range(world_size)]
    assert len({len(share) for share in padded}) == 1, "every rank gets the same count"
    real = [plan.index for share in padded for plan in share if not plan.padding]
    assert sorted(real) == list(range(num_samples)), "every sample once, padding aside"
    assert all(plan.padding for share in padded for plan in share[len([p for p in share if not p.padding]) :])
    dropped = [list(Sampler(num_samples, world_size=world_size, rank=rank, seed=1, pad=False)) for rank in range(world_size)]
    assert len({len(share) for share in dropped}) == 1
    indices = [plan.index for share in dropped for plan in share]
    assert len(indices) == len(set(indices)) == (num_samples // world_size) * world_size
    assert not any(plan.padding for share in dropped for plan in share)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Sampler(0)
    with pytest.raises(ValueError):
        Sampler(10, rank=2, world_size=2)


def test_one_rank_state_cannot_change_the_world_size() -> None:
    sampler = Sampler(100, rank=0, world_size=2)
    state = sampler.state_dict()
    with pytest.raises(ValueError, match="every rank's state"):
        Sampler(100, rank=0, world_size=3).load_state_dict(state)
    with pytest.raises(ValueError, match="samples"):
        Sampler(99, rank=0, world_size=2).load_state_dict(state)
    with pytest.raises(ValueError, match="ranks 0..1"):
        Sampler(100, rank=0, world_size=3).load_state_dict([state])


def test_position_sets_merge_ranges() -> None:
    positions = PositionSet()
    positions.add_many([5, 1, 2, 3, 9, 10, 4])
    assert positions.ranges() == [(1, 6), (9, 11)]
    assert len(positions) == 7
    assert positions.union(PositionSet([(6, 9)])).ranges() == [(1, 11)]
    assert positions.intersection(PositionSet()).ranges() == [] and PositionSet().intersection(positions).ranges() == []
    assert positions.difference(PositionSet()).ranges() == positions.ranges()


def test_a_world_where_one_rank_delivered_nothing_continues_on_another() -> None:
    """Rank 1 was stopped before its first batch, rank 0 after one: the merge of their records
    (one of them empty) raised IndexError before."""
    first = [Sampler(100, seed=2, rank=rank, world_size=2) for rank in range(2)]
    done = first[0].plan_arrays().part(0, 8)
    first[0].mark_delivered(done.positions, done.padding)
    states = [sampler.state_dict() for sampler in first]
    rest = [Sampler(100, seed=2, rank=rank, world_size=3) for rank in range(3)]
    for sampler in rest:
        sampler.load_state_dict(states)
    later = [int(index) for sampler in rest for plan in [sampler.plan_arrays()] for index in plan.indices[~plan.padding]]
    assert sorted(later + done.indices.tolist()) == list(range(100)), "each sample once over both worlds"
