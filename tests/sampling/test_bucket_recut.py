"""A bucketed epoch resumed with another per-rank batch size (`Sampler.load_state_dict(...,
batch_size_before=...)`, `RecutOrder`): what the world had not delivered is cut again by bucket
for the new size; every batch stays one bucket's and full, every rank takes the same steps, each
sample is read once over the runs (a bucket's last partial batch of the new size left over), and
the cut epoch resumes again, on any world. Checked against what every rank's plan hands out."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigurationError
from stoker.sampling import Sampler

BUCKETS = 3


def bucket_of(samples: int) -> np.ndarray:
    return (np.arange(samples) * 7 % (BUCKETS + 1) - 1).astype(np.int16)  # some samples in no bucket


def world(samples: int, ranks: int, batch: int) -> list[Sampler]:
    return [
        Sampler(samples, seed=9, rank=rank, world_size=ranks, buckets=(bucket_of(samples), BUCKETS), batch_size=batch)
        for rank in range(ranks)
    ]


def run(ranks: list[Sampler], steps: int, batch: int, read: Counter[int]) -> list[int]:
    """Every rank takes up to ``steps`` batches in step; each batch checked whole and one bucket's.
    Returns each rank's steps."""
    taken = [0] * len(ranks)
    plans = [sampler.plan_arrays() for sampler in ranks]
    for step in range(min(steps, max(-(-plan.size // batch) for plan in plans))):
        for number, (sampler, plan) in enumerate(zip(ranks, plans)):
            part = plan.part(step * batch, (step + 1) * batch)
            if not part.size:
                continue
            assert part.size == batch, "every batch full"
            assert len(set(bucket_of(sampler.num_samples)[part.indices].tolist())) == 1, "every batch one bucket's"
            sampler.mark_delivered(part.positions, part.padding)
            read.update(part.indices[~part.padding].tolist())
            taken[number] += 1
    return taken


@settings(max_examples=60, deadline=None)
@given(
    samples=st.integers(120, 400),
    first=st.tuples(st.integers(1, 3), st.integers(2, 9), st.integers(0, 8)),  # ranks, batch size, steps
    second=st.tuples(st.integers(1, 3), st.integers(2, 9), st.integers(0, 8)),
    third=st.integers(1, 3),
)
def test_each_sample_once_in_whole_batches_of_one_bucket_across_batch_sizes(
    samples: int, first: tuple[int, int, int], second: tuple[int, int, int], third: int
) -> None:
    (ranks0, batch0, steps0), (ranks1, batch1, steps1) = first, second
    read: Counter[int] = Counter()
    try:
        began = world(samples, ranks0, batch0)
    except ConfigurationError:
        return  # no full batch for each rank at this size: not a bucketed epoch to resume
    run(began, steps0, batch0, read)
    states = [sampler.state_dict() for sampler in began]
    cut = world(samples, ranks1, batch1)
    try:
        for sampler in cut:
            sampler.load_state_dict(states, batch_size_before=batch0)
    except ConfigurationError as error:
        assert "no bucket's rest holds a full batch" in str(error)
        return
    steps = run(cut, steps1, batch1, read)
    assert len(set(steps)) == 1, "every rank the same steps"
    again = world(samples, third, batch1)
    saved = [sampler.state_dict() for sampler in cut]
    for sampler in again:
        sampler.load_state_dict(saved)  # the cut carries in the states: the same batch size, another world
    steps = run(again, 10**6, batch1, read)
    assert len(set(steps)) == 1, "every rank the same steps"
    assert max(read.values(), default=1) == 1, "no sample read twice"
    # Not read: the first order's leftovers, and each bucket's last partial batch of the new size.
    unread = Counter(bucket_of(samples)[sorted(set(range(samples)) - set(read))].tolist())
    left_over = began[0].order_function().leftovers()  # type: ignore[attr-defined]
    assert all(unread[bucket] < left_over[bucket] + batch1 for bucket in range(BUCKETS)), (unread, left_over)
    assert unread[-1] == int((bucket_of(samples) == -1).sum()), "samples of no bucket are never read"


def test_one_state_or_carried_leftovers_or_a_second_cut_are_refused_by_name() -> None:
    states = [sampler.state_dict() for sampler in world(300, 2, 4)]
    with pytest.raises(ConfigurationError, match="from every rank's states"):
        world(300, 2, 6)[0].load_state_dict(states[0], batch_size_before=4)
    carried = Sampler(300, seed=9, buckets=(bucket_of(300), BUCKETS), batch_size=6, leftovers="carry")
    with pytest.raises(ConfigurationError, match="leftovers='carry'"):
        carried.load_state_dict(states, batch_size_before=4)
    cut = world(300, 2, 6)
    for sampler in cut:
        sampler.load_state_dict(states, batch_size_before=4)
    with pytest.raises(ConfigurationError, match="cut again for another batch size once already"):
        world(300, 2, 5)[0].load_state_dict([sampler.state_dict() for sampler in cut], batch_size_before=6)
