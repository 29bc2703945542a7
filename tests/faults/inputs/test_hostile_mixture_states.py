"""A mixture's changes of weights in a saved state are input too: each one replayed redraws the
rest of the epoch (time in the epoch's samples), so a state holding more of them than a Loader
makes in an epoch (10**5 took 30-45 s of CPU to resume) is refused by name before any is replayed,
and a Loader never makes more than it would load back."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling
from stoker.storage import MemoryStorage, MixedStorage

LIMIT = 2048  # by hand (1,024) and by a schedule (1,024 points)


def mixture_loader() -> Loader:
    mixture = MixedStorage(
        {"a": MemoryStorage({f"a{index}": b"a" for index in range(50)}), "b": MemoryStorage({f"b{index}": b"b" for index in range(50)})},
        {"a": 1.0, "b": 1.0},
        seed=1,
    )
    return Loader(mixture, batch_size=4, sampling=Sampling(seed=2))


def state_with_changes(count: int) -> dict[str, Any]:
    loader = mixture_loader()
    batches = iter(loader)
    next(batches)
    loader.set_mixture_weights({"a": 2.0, "b": 1.0})
    next(batches)
    state = loader.state_dict()
    loader.close()
    change = state["mixture"]["changes"][0]
    state["mixture"]["changes"] = [copy.deepcopy(change) for _ in range(count)]
    return state


def test_a_state_of_a_hundred_thousand_mixture_changes_is_refused_by_name_before_any_is_replayed() -> None:
    loader = mixture_loader()
    with pytest.raises(ConfigurationError, match=r"mixture's weights changed 100,000 times in the epoch, more than the 2,048"):
        loader.load_state_dict(state_with_changes(100_000))
    keys = [key for batch in loader for key in batch.keys]
    assert len(keys) == 100, "the refused state changed nothing"
    loader.close()


def test_a_state_at_the_bound_resumes() -> None:
    loader = mixture_loader()
    loader.load_state_dict(state_with_changes(LIMIT))
    assert sum(len(batch.keys) for batch in loader) == 100 - 8, "the epoch's rest after two batches"
    loader.close()


def test_a_loader_makes_no_more_changes_by_hand_than_a_state_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    loader = mixture_loader()
    monkeypatch.setattr(type(loader.storage), "reweight", lambda self, weights, delivered, record=None: self.changes.append({}))
    for _ in range(1024):
        loader.set_mixture_weights({"a": 2.0, "b": 1.0})
    with pytest.raises(ConfigurationError, match=r"changed 1,024 times; an epoch takes 1,024 changes by hand"):
        loader.set_mixture_weights({"a": 1.0, "b": 2.0})
    loader.close()


def _two_ranks_states(schedule: dict[int, dict[str, float]]) -> list[dict[str, Any]]:
    states = []
    for rank in (0, 1):
        mixture = MixedStorage(
            {
                "a": MemoryStorage({f"a{index}": b"a" for index in range(50)}),
                "b": MemoryStorage({f"b{index}": b"b" for index in range(50)}),
            },
            {"a": 1.0, "b": 1.0},
            seed=1,
        )
        loader = Loader(mixture, batch_size=4, sampling=Sampling(seed=2, rank=rank, world_size=2))
        loader.set_mixture_schedule(schedule)
        batches = iter(loader)
        next(batches)
        states.append(loader.state_dict())
        batches.close()
    return states


@pytest.mark.parametrize("edit", ["one rank's points differ", "one rank lacks the part"])
def test_ranks_states_that_disagree_on_their_schedule_are_refused_by_name(edit: str) -> None:
    # Was: the first state's schedule resumed every rank, whatever the others said.
    # Points not reached yet: the epoch's weights have not changed (states of a changed epoch
    # load on the world size they were saved at, rank by rank).
    states = _two_ranks_states({40: {"a": 1.0, "b": 2.0}, 50: {"a": 3.0, "b": 1.0}})
    if edit == "one rank lacks the part":
        del states[1]["mixture_schedule"]
    else:
        states[1]["mixture_schedule"]["points"][1][1] = {"a": 1.0, "b": 3.0}
    loader = Loader(
        MixedStorage(
            {
                "a": MemoryStorage({f"a{index}": b"a" for index in range(50)}),
                "b": MemoryStorage({f"b{index}": b"b" for index in range(50)}),
            },
            {"a": 1.0, "b": 1.0},
            seed=1,
        ),
        batch_size=4,
        sampling=Sampling(seed=2, rank=0, world_size=2),
    )
    with pytest.raises(ConfigurationError, match=r"ranks' states hold a 'mixture_schedule' part, and every rank saves the same one"):
        loader.load_state_dict(states)
    loader.load_state_dict(_two_ranks_states({40: {"a": 1.0, "b": 2.0}, 50: {"a": 3.0, "b": 1.0}}))  # agreeing states load
