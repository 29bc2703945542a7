"""`Sampler.set_domain` and `Sampler.leave_out`: an order over samples that joined an epoch late keeps the
first samples' order and puts the late ones after, shuffled among themselves; positions left out
for every rank are dealt to none, and the rest stays equal across ranks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigurationError
from stoker.sampling import Sampler


@settings(max_examples=40, deadline=None)
@given(base=st.integers(1, 300), appended=st.integers(1, 60), seed=st.integers(0, 2**32), shuffle=st.booleans())
def test_appended_samples_follow_the_first_ones_in_their_own_order(base: int, appended: int, seed: int, shuffle: bool) -> None:
    plain = Sampler(base, shuffle=shuffle, seed=seed)
    grown = Sampler(base, shuffle=shuffle, seed=seed)
    grown.set_domain(base + appended, None, appended=appended)
    order = grown.order()
    assert np.array_equal(order[:base], plain.order()), "the first samples keep their order"
    assert sorted(order[base:].tolist()) == list(range(base, base + appended)), "each late sample once, after"


@settings(max_examples=40, deadline=None)
@given(size=st.integers(20, 400), world=st.integers(1, 4), data=st.data())
def test_positions_left_out_are_dealt_to_no_rank_and_the_rest_stays_equal(size: int, world: int, data: st.DataObject) -> None:
    gone = np.array(sorted(data.draw(st.sets(st.integers(0, size - 1), max_size=size // 2))), dtype=np.int64)
    plans = []
    for rank in range(world):
        sampler = Sampler(size, seed=3, rank=rank, world_size=world, pad=True)
        sampler.leave_out(gone)
        plans.append(sampler.plan_arrays().part(0, size))
    assert len({len(plan.positions) for plan in plans}) == 1, "every rank has as many samples left"
    real = np.concatenate([plan.positions[~plan.padding] for plan in plans])
    assert sorted(real.tolist()) == sorted(set(range(size)) - set(gone.tolist())), "each sample left once, none left out"


def test_leave_out_after_deliveries_in_step_and_domains_keep_their_scheme() -> None:
    # Ranks in step: what both delivered is done for the world, told from one rank's record.
    ranks = [Sampler(100, seed=1, rank=rank, world_size=2) for rank in range(2)]
    for sampler in ranks:
        part = sampler.plan_arrays().part(0, 10)
        sampler.mark_delivered(part.positions, part.padding)
    both = set(ranks[0].delivered_positions().tolist()) | set(ranks[1].delivered_positions().tolist())
    ranks[0].leave_out(np.array([50]))
    assert set(ranks[0].delivered_positions().tolist()) == both | {50}
    out_of_step = Sampler(100, seed=1, rank=0, world_size=2)
    later = out_of_step.plan_arrays().part(10, 20)
    out_of_step.mark_delivered(later.positions, later.padding)
    with pytest.raises(ConfigurationError, match="not its first ones in order"):
        out_of_step.leave_out(np.array([50]))
    # With one rank, its record is the world's: what it delivered stays delivered, the rest is dealt.
    alone = Sampler(100, seed=1)
    first = alone.plan_arrays().part(0, 10)
    alone.mark_delivered(first.positions, first.padding)
    alone.leave_out(np.array([first.positions[0], 99]))
    rest = alone.plan_arrays().part(0, 100).positions
    assert sorted(rest.tolist()) == sorted(set(range(100)) - set(first.positions.tolist()) - {99})
    with pytest.raises(ConfigurationError, match="blocks for 100 samples"):
        Sampler(100, seed=1).set_domain(100, [50, 50])
    with pytest.raises(ConfigurationError, match="appended samples of"):
        Sampler(100, seed=1).set_domain(10, None, appended=10)
