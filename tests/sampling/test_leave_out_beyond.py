"""`Sampler.leave_out_beyond`: positions left out for every rank from a slot every rank agrees on
(what `Loader.exclude(keys=...)` does behind a read-ahead wrapper). Each rank's slots before it
keep their positions, so its record stays valid and a batch a wrapper holds can be handed back;
the rest is dealt again without the left-out positions, each once, and a resume from every
rank's states on another world finishes the epoch exactly. Checked against every rank's plan."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigurationError
from stoker.sampling import Sampler


def world_of(samples: int, world: int, shuffle: str, pad: bool) -> list[Sampler]:
    blocks = [min(7, samples - start) for start in range(0, samples, 7)] if shuffle == "block" else None
    return [
        Sampler(samples, seed=4, rank=rank, world_size=world, pad=pad, blocks=blocks, shuffle=shuffle != "none") for rank in range(world)
    ]


def deliver(sampler: Sampler, first: int, last: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Slots ``first`` to ``last`` of the plan as it is, marked delivered: their (positions, padding)."""
    plan = sampler.plan_arrays()
    part = plan.part(first - sampler.delivered_count, last - sampler.delivered_count)
    if part.size:
        sampler.mark_delivered(part.positions, part.padding)
    return [(part.positions, part.padding)]


@settings(max_examples=150, deadline=None)
@given(
    samples=st.integers(1, 300),
    world=st.integers(1, 4),
    slot=st.integers(0, 80),
    reached=st.lists(st.integers(0, 120), min_size=4, max_size=4),
    held=st.lists(st.integers(0, 10), min_size=4, max_size=4),
    pad=st.booleans(),
    shuffle=st.sampled_from(["uniform", "block", "none"]),
    left_out=st.lists(st.integers(0, 299), max_size=30),
    resume_on=st.integers(1, 4),
    edges=st.booleans(),
)
def test_positions_go_from_the_slot_on_and_every_other_is_read_once(
    samples: int,
    world: int,
    slot: int,
    reached: list[int],
    held: list[int],
    pad: bool,
    shuffle: str,
    left_out: list[int],
    resume_on: int,
    edges: bool,
) -> None:
    ranks = world_of(samples, world, shuffle, pad)
    before = [sampler.plan_arrays() for sampler in ranks]
    dealt_before = {int(p) for plan in before for p in plan.part(0, slot).positions}
    # Each rank delivered (or a wrapper holds) some of its first `slot` slots, in order.
    holding, read = [], Counter[int]()
    for rank, sampler in enumerate(ranks):
        upto = min(reached[rank], slot, before[rank].size)
        keep = max(0, upto - held[rank])
        for positions, padding in deliver(sampler, 0, keep):
            read.update(positions[~padding].tolist())
        holding.append(deliver(sampler, keep, upto))
    if edges:  # the positions either side of the slot, on every rank
        left_out += [int(p) for plan in before for p in plan.part(max(0, slot - 1), slot + 1).positions]
    wanted = np.array(sorted({position for position in left_out if position < samples}), np.int64)
    masks = [sampler.leave_out_beyond(wanted, slot=slot) for sampler in ranks]
    assert all((mask == masks[0]).all() for mask in masks), "every rank leaves out the same"
    gone = set(wanted[masks[0]].tolist())
    assert not gone & dealt_before, "nothing dealt before the slot goes"
    assert gone == set(wanted.tolist()) - dealt_before if pad else gone <= set(wanted.tolist())
    for sampler, plan in zip(ranks, before):
        after = sampler.plan_arrays()  # the slots before `slot` keep their positions
        undelivered = plan.part(0, plan.size).positions
        within = min(slot, plan.size) - sampler.delivered_count
        assert after.part(0, within).positions.tolist() == undelivered[sampler.delivered_count : sampler.delivered_count + within].tolist()
    # The wrapper closes: what it held is handed back, and the ranks save their states.
    for sampler, batches in zip(ranks, holding):
        for positions, padding in batches:
            sampler.unmark_delivered(positions, padding)
    states = [sampler.state_dict() for sampler in ranks]
    resumed = world_of(samples, resume_on, shuffle, pad)
    for sampler in resumed:
        sampler.load_state_dict(states)
    rest = [sampler.plan_arrays() for sampler in resumed]
    assert len({plan.size for plan in rest}) == 1 or not pad, "equal steps on every rank"
    for plan in rest:
        part = plan.part(0, plan.size)
        read.update(int(p) for p in part.positions[~part.padding].tolist())
    if pad:
        assert read == Counter(set(range(samples)) - gone), "every position not left out read once"
    else:
        assert max(read.values(), default=1) == 1 and not gone & set(read)


def test_a_rank_past_the_slot_or_no_slot_with_several_ranks_is_refused_by_name() -> None:
    ranks = world_of(100, 2, "uniform", True)
    deliver(ranks[0], 0, 12)
    with pytest.raises(ConfigurationError, match="rank 0 delivered slot 11 of its plan, past slot 10"):
        ranks[0].leave_out_beyond(np.array([5]), slot=10)
    with pytest.raises(ConfigurationError, match="from a slot every rank agrees on"):
        ranks[1].leave_out_beyond(np.array([5]), slot=None)
    assert ranks[0].done_everywhere == 0, "a refusal leaves nothing out"


def test_one_rank_leaves_out_from_the_end_of_its_record_in_any_order() -> None:
    alone = Sampler(50, seed=2)
    plan = alone.plan_arrays()
    part = plan.part(0, 10)
    alone.mark_delivered(part.positions[[0, 1, 2, 7]], part.padding[[0, 1, 2, 7]])  # out of order: slots 3 to 6 not yet
    later = plan.part(10, 50).positions
    mask = alone.leave_out_beyond(np.concatenate([part.positions[[1, 4]], later[:3]]), slot=None)
    assert mask.tolist() == [False, False, True, True, True], "what is before the record's end stays"
    rest = alone.plan_arrays().part(0, 50).positions.tolist()
    assert sorted(rest + part.positions[[0, 1, 2, 7]].tolist()) == sorted(set(range(50)) - set(later[:3].tolist()))
