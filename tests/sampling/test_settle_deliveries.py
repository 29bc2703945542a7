"""`Sampler.settle_deliveries`: ranks going in step take what the world delivered so far as done,
from this rank's own record alone, so the rest can be dealt again (what `Loader.exclude(keys=...)`
needs while every rank's loop runs). Checked against every rank's actual deliveries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigurationError
from stoker.sampling import Sampler


def in_step(samples: int, world: int, batch: int, steps: int, pad: bool, shuffle: str, left_out: list[int]) -> list[Sampler]:
    """Every rank's sampler after ``steps`` batches each (from a world that already left some
    positions out, as a resume or an earlier exclusion does)."""
    blocks = [min(7, samples - start) for start in range(0, samples, 7)] if shuffle == "block" else None
    ranks = [
        Sampler(samples, seed=4, rank=rank, world_size=world, pad=pad, blocks=blocks, shuffle=shuffle != "none") for rank in range(world)
    ]
    for sampler in ranks:
        sampler.leave_out(np.array(left_out, np.int64))
        plan = sampler.plan_arrays()
        for step in range(steps):
            part = plan.part(step * batch, min(plan.size, (step + 1) * batch))
            if part.size:
                sampler.mark_delivered(part.positions, part.padding)
    return ranks


@settings(max_examples=150, deadline=None)
@given(
    samples=st.integers(1, 300),
    world=st.integers(1, 4),
    batch=st.integers(1, 9),
    steps=st.integers(0, 40),
    pad=st.booleans(),
    shuffle=st.sampled_from(["uniform", "block", "none"]),
    left_out=st.lists(st.integers(0, 299), max_size=20),
)
def test_a_rank_in_step_settles_exactly_what_every_rank_delivered(
    samples: int, world: int, batch: int, steps: int, pad: bool, shuffle: str, left_out: list[int]
) -> None:
    left_out = sorted({position for position in left_out if position < samples})
    ranks = in_step(samples, world, batch, steps, pad, shuffle, left_out)
    delivered = set(left_out).union(*(set(sampler.delivered_positions().tolist()) for sampler in ranks))
    for sampler in ranks:
        sampler.settle_deliveries()
        assert set(sampler.delivered_positions().tolist()) == delivered
        assert sampler.done_everywhere == len(delivered)
    # The rest, dealt again, covers what no rank read, once, in equal counts.
    plans = [sampler.plan_arrays() for sampler in ranks]
    rest = [plan.part(0, plan.size) for plan in plans]
    assert len({plan.size for plan in plans}) == 1 or not pad
    real = np.concatenate([part.positions[~part.padding] for part in rest])
    assert sorted(real.tolist()) == sorted(set(range(samples)) - delivered) if pad else len(set(real.tolist())) == len(real)


def test_deliveries_out_of_the_plan_order_are_refused_by_name() -> None:
    sampler = Sampler(100, seed=1, rank=0, world_size=2)
    part = sampler.plan_arrays().part(10, 20)
    sampler.mark_delivered(part.positions, part.padding)  # the plan's slots 10 to 19, not its first
    with pytest.raises(ConfigurationError, match=r"delivered slots \[\(10, 20\)\] of its plan, not its first ones in order"):
        sampler.settle_deliveries()
    assert sampler.delivered == 10, "a refused settle changes nothing"
