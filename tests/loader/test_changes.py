"""The one queue of changes between batches: what waits, in which order it applies, what is
refused, and that changes put from many threads at once are each taken once."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.errors import ConfigurationError
from stoker.loader._changes import Change, ChangesBetweenBatches, ExcludeKeys, ExcludeSteps, NewWeights


def test_kinds_apply_weights_first_then_steps_then_keys_each_kind_in_the_order_asked() -> None:
    changes = ChangesBetweenBatches()
    assert not changes
    changes.put(ExcludeKeys(["a"], None))
    changes.put(ExcludeSteps(range(3, 5)))
    changes.put(NewWeights({"web": 1.0}))
    changes.put(ExcludeKeys(["b"], 7))
    changes.put(ExcludeKeys(["c", "a"], None))  # joins the waiting one from its slot, each key once
    assert changes
    taken = changes.take()
    assert taken == [NewWeights({"web": 1.0}), ExcludeSteps(range(3, 5)), ExcludeKeys(["a", "c"], None), ExcludeKeys(["b"], 7)]
    assert not changes and changes.take() == []


def test_the_newest_weights_win_and_a_schedule_point_they_replace_still_counts_as_applied() -> None:
    changes = ChangesBetweenBatches()
    changes.put(NewWeights({"web": 0.5, "books": 0.5}, through=100))  # the schedule's point at step 100
    changes.put(NewWeights({"web": 0.9, "books": 0.1}))  # the user's, asked after it
    assert changes.take() == [NewWeights({"web": 0.9, "books": 0.1}, through=100)]
    changes.put(NewWeights({"web": 0.9, "books": 0.1}, through=200))
    changes.put(NewWeights({"web": 0.2, "books": 0.8}, through=100))
    assert changes.take() == [NewWeights({"web": 0.2, "books": 0.8}, through=200)], "the furthest point applied stays applied"


def test_a_second_other_range_of_steps_is_refused_and_the_same_one_waits_once() -> None:
    changes = ChangesBetweenBatches()
    changes.put(ExcludeSteps(range(10, 12)))
    changes.put(ExcludeSteps(range(10, 12)))
    with pytest.raises(ConfigurationError, match=r"exclude\(steps=range\(20, 21\)\) while exclude\(steps=range\(10, 12\)\) waits"):
        changes.put(ExcludeSteps(range(20, 21)))
    assert changes.take() == [ExcludeSteps(range(10, 12))], "the refused one left the waiting one as it was"
    changes.put(ExcludeSteps(range(20, 21)))  # after the next batch it is taken
    assert changes.take() == [ExcludeSteps(range(20, 21))]


_kinds = st.one_of(
    st.builds(lambda index: ExcludeKeys([f"k{index}"], None), st.integers(0, 50)),
    st.builds(lambda weight: NewWeights({"web": float(weight)}), st.integers(1, 9)),
    st.builds(lambda start: ExcludeSteps(range(start, start + 1)), st.just(5)),
)


@given(st.lists(_kinds, max_size=30))
def test_any_sequence_takes_sorted_by_kind_keys_joined_weights_merged(asked: list[Change]) -> None:
    changes = ChangesBetweenBatches()
    for change in asked:
        changes.put(change)
    taken = changes.take()
    assert [change.order for change in taken] == sorted(change.order for change in taken)
    keys = [key for change in asked if isinstance(change, ExcludeKeys) for key in change.keys]
    joined = [change for change in taken if isinstance(change, ExcludeKeys)]
    assert joined == ([ExcludeKeys(list(dict.fromkeys(keys)), None)] if keys else []), "one change, every key once, in the order asked"
    weights = [change for change in asked if isinstance(change, NewWeights)]
    assert [change for change in taken if isinstance(change, NewWeights)] == ([weights[-1]] if weights else [])
    assert sum(isinstance(change, ExcludeSteps) for change in taken) == min(1, sum(isinstance(change, ExcludeSteps) for change in asked))


def test_changes_put_from_many_threads_while_the_loop_takes_are_each_taken_once() -> None:
    changes = ChangesBetweenBatches()
    taken: list[Change] = []
    done = threading.Event()

    def loop() -> None:
        while not done.is_set() or changes:
            taken.extend(changes.take())

    def asker(thread: int) -> None:
        for index in range(500):
            changes.put(ExcludeKeys([f"t{thread}-{index}"], None))

    consumer = threading.Thread(target=loop)
    consumer.start()
    askers = [threading.Thread(target=asker, args=(thread,)) for thread in range(8)]
    for thread in askers:
        thread.start()
    for thread in askers:
        thread.join()
    done.set()
    consumer.join(timeout=30)
    assert not consumer.is_alive()
    keys = [key for change in taken if isinstance(change, ExcludeKeys) for key in change.keys]
    assert sorted(keys) == sorted(f"t{thread}-{index}" for thread in range(8) for index in range(500))
