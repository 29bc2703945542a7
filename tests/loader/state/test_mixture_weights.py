"""Mixture weights changed between steps (a curriculum): the rest of the epoch follows the new
weights, the change is part of the state, and a resume after it reproduces the same stream."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling
from stoker.storage import MemoryStorage, MixedStorage

BIG = MemoryStorage({f"b{index}": b"big" for index in range(5000)})
SMALL = MemoryStorage({f"s{index}": b"small" for index in range(800)})


def loader() -> Loader:
    mixture = MixedStorage({"big": BIG, "small": SMALL}, {"big": 0.7, "small": 0.3}, num_samples=4000, seed=5)
    return Loader(mixture, batch_size=100, sampling=Sampling(seed=2, in_order=True))


def share_of_small(batches: list[list[str]]) -> float:
    counts = Counter(key.split("/")[0] for keys in batches for key in keys)
    return counts["small"] / sum(counts.values())


def test_new_weights_apply_from_the_next_batch_and_a_resume_reproduces_the_stream() -> None:
    straight = loader()
    stream = iter(straight)
    before = [next(stream).keys for _ in range(10)]
    straight.set_mixture_weights({"big": 0.2, "small": 0.8})
    after = [batch.keys for batch in stream]
    assert share_of_small(before) == pytest.approx(0.3, abs=0.06)
    assert share_of_small(after) == pytest.approx(0.8, abs=0.06)
    assert sum(map(len, before + after)) == 4000
    assert straight.verify_epoch()["delivered"] == 4000, "each position of the epoch exactly once"

    interrupted = loader()
    stream = iter(interrupted)
    for _ in range(10):
        next(stream)
    interrupted.set_mixture_weights({"big": 0.2, "small": 0.8})
    for _ in range(5):
        next(stream)
    state = interrupted.state_dict()
    stream.close()  # type: ignore[attr-defined]
    assert state["mixture"]["changes"][0]["weights"] == {"big": 0.2, "small": 0.8}

    resumed = loader()
    resumed.load_state_dict(state)
    rest = [batch.keys for batch in resumed]
    assert rest == after[5:], "the same samples in the same order as the run that went on"
    assert resumed.verify_epoch()["delivered"] == 4000


def test_the_next_epoch_keeps_the_new_weights() -> None:
    mixed = loader()
    mixed.set_mixture_weights({"big": 0.5, "small": 0.5})
    first = [batch.keys for batch in mixed]
    second = [batch.keys for batch in mixed]
    assert share_of_small(first) == pytest.approx(0.5, abs=0.01)
    assert share_of_small(second) == pytest.approx(0.5, abs=0.01)


def test_weights_need_a_mixture_and_every_source() -> None:
    with pytest.raises(ConfigurationError, match="needs a MixedStorage"):
        Loader(BIG, batch_size=10).set_mixture_weights({"big": 1.0})
    with pytest.raises(ValueError, match="give every source a finite positive weight"):
        loader().set_mixture_weights({"big": 1.0})


def test_a_change_far_into_a_shuffled_epoch_keeps_the_state_small_and_resumes_exactly() -> None:
    # The state keeps what was delivered before the change as spans of epoch positions, not as
    # one storage index a sample: 50,000 delivered samples were about 350 KB of the state.
    def shuffled() -> Loader:
        mixture = MixedStorage({"big": BIG, "small": SMALL}, {"big": 0.7, "small": 0.3}, num_samples=100_000, seed=5)
        return Loader(mixture, batch_size=1000, sampling=Sampling(seed=2, in_order=True))

    interrupted = shuffled()
    stream = iter(interrupted)
    for _ in range(50):
        next(stream)
    interrupted.set_mixture_weights({"big": 0.2, "small": 0.8})
    for _ in range(3):
        next(stream)
    state = json.loads(json.dumps(interrupted.state_dict()))
    went_on = [next(stream).keys for _ in range(2)]
    stream.close()  # type: ignore[attr-defined]
    assert len(json.dumps(state)) < 4096, len(json.dumps(state))
    assert "delivered" not in state["mixture"]["changes"][0]
    resumed = shuffled()
    resumed.load_state_dict(state)
    rest = iter(resumed)
    assert [next(rest).keys for _ in range(2)] == went_on, "the same samples in the same order as the run that went on"
    rest.close()  # type: ignore[attr-defined]
