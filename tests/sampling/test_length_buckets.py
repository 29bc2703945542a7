"""`LengthBuckets`: every sample goes to the longest bucket it fills (checked against a plain loop
over the buckets for any lengths), shorter samples are skipped or padded as asked, unknown
lengths go nowhere, and bad bucket lists are refused by name."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.errors import ConfigurationError
from stoker.sampling import LengthBuckets

lengths = st.lists(st.floats(0.01, 1e4, allow_nan=False), min_size=1, max_size=12, unique=True)
capacities = st.lists(st.one_of(st.floats(-1, 2e4), st.just(0.0), st.just(float("nan"))), max_size=60)


def _by_hand(buckets: LengthBuckets, capacity: float) -> int:
    if not (math.isfinite(capacity) and capacity > 0):
        return -1
    fitting = [number for number, length in enumerate(buckets.lengths) if length <= capacity]
    if fitting:
        return max(fitting, key=lambda number: buckets.lengths[number])
    return min(range(len(buckets)), key=lambda number: buckets.lengths[number]) if buckets.shorter == "pad" else -1


@given(lengths, capacities, st.sampled_from(["skip", "pad"]))
def test_each_sample_goes_to_the_longest_bucket_it_fills(chosen: list[float], samples: list[float], shorter: str) -> None:
    buckets = LengthBuckets(chosen, shorter=shorter)
    assigned = buckets.assign(np.array(samples, dtype=np.float64))
    assert assigned.tolist() == [_by_hand(buckets, capacity) for capacity in samples]
    kept = buckets.kept_share(np.array(samples, dtype=np.float64), assigned)
    assert np.all(np.isnan(kept[assigned < 0]))
    assert np.all((kept[assigned >= 0] > 0) & (kept[assigned >= 0] <= 1))


def test_geometric_lengths_grow_by_one_ratio_and_whole_ones_are_frames() -> None:
    buckets = LengthBuckets.geometric(1.0, 16.0, 5)
    assert buckets.lengths == pytest.approx((1.0, 2.0, 4.0, 8.0, 16.0))
    ratio = (20 / 8) ** (1 / 5)  # 8, 9.6, 11.5, 13.9, 16.6, 20: rounded to whole frames
    assert LengthBuckets.geometric(8, 20, 6, whole=True).lengths == tuple(float(round(8 * ratio**step)) for step in range(6))
    assert LengthBuckets.geometric(1, 3, 8, whole=True).lengths == (1.0, 2.0, 3.0), "repeats dropped"
    assert LengthBuckets.geometric(3.0, 3.0, 1).lengths == (3.0,)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"lengths": []}, "no buckets"),
        ({"lengths": [1.0, 0.0]}, "positive and finite"),
        ({"lengths": [1.0, float("inf")]}, "positive and finite"),
        ({"lengths": [2.0, 2.0]}, "given twice"),
        ({"lengths": ["2"]}, "is a number"),
        ({"lengths": [True]}, "is a number"),
        ({"lengths": [1.0], "shorter": "crop"}, "shorter must be"),
        ({"lengths": list(range(1, 5000))}, "at most"),
    ],
)
def test_bad_bucket_lists_are_refused_by_name(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        LengthBuckets(**arguments)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="shortest <= longest"):
        LengthBuckets.geometric(4.0, 2.0, 3)
