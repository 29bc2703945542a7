"""Changes to the rest of an epoch asked for around a running loop (`Loader.exclude`,
`set_mixture_weights`, a schedule's point): the one queue they wait in (what waits, in which order
it applies, what is refused, each taken once from many threads), and what a hostile pass found
going wrong around it: never lost, never applied to the wrong epoch or over a loaded checkpoint,
never racing a loop that starts, never accepted when they cannot be drawn."""

from __future__ import annotations

import math
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling, Throughput
from stoker.loader._changes import Change, ChangesBetweenBatches, ExcludeKeys, ExcludeSteps, NewWeights
from stoker.storage import MemoryStorage, MixedStorage


def _memory(count: int, prefix: str = "k") -> MemoryStorage:
    return MemoryStorage({f"{prefix}{index:06d}": bytes([index % 251]) for index in range(count)})


def _loader(count: int = 64, batch_size: int = 4, **options: object) -> Loader:
    return Loader(_memory(count), batch_size=batch_size, decode=bytes, sampling=Sampling(shuffle="none", in_order=True), **options)  # type: ignore[arg-type]


def _mixed() -> Loader:
    mixture = MixedStorage({"web": _memory(32, "w"), "books": _memory(32, "b")}, {"web": 1.0, "books": 1.0})
    return Loader(mixture, batch_size=4, decode=bytes, sampling=Sampling(shuffle="none", in_order=True))


def test_an_exclusion_asked_for_as_another_thread_starts_the_loop_is_kept_whole() -> None:
    # Was: applied "now" (no loop yet) while the other thread's loop made its plan, which died
    # on a position the exclusion had cut: 0 batches, 66,666 of 100,000 samples undelivered.
    samples = 30_000
    for attempt in range(3):
        loader = Loader(
            _memory(samples),
            batch_size=500,
            decode=bytes,
            sampling=Sampling(seed=attempt),
            throughput=Throughput(decode_concurrency=2),
        )
        dropped = {f"k{index:06d}" for index in range(0, samples, 3)}
        delivered: list[str] = []
        errors: list[BaseException] = []
        go = threading.Event()

        def loop(
            loader: Loader = loader, delivered: list[str] = delivered, errors: list[BaseException] = errors, go: threading.Event = go
        ) -> None:
            go.wait()
            try:
                for batch in loader:
                    delivered.extend(key for key, padding in zip(batch.keys, batch.padding) if not padding)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        thread = threading.Thread(target=loop)
        thread.start()
        go.set()
        loader.exclude(keys=sorted(dropped))
        thread.join(timeout=120)
        assert not thread.is_alive() and errors == []
        assert len(delivered) == len(set(delivered)), "no sample twice"
        # Before the loop's plan, or from its next batch: the keys delivered before are the only ones kept.
        assert set(delivered) | dropped >= {f"k{index:06d}" for index in range(samples)}
        verified = loader.verify_epoch()
        assert verified["samples"] == samples


def test_an_exclusion_asked_for_before_a_break_is_in_the_state_and_not_carried_into_the_next_epoch() -> None:
    loader = _loader()
    for number, _batch in enumerate(loader):
        if number == 2:
            loader.exclude(keys=["k000050", "k000051"])
            break
    state = loader.state_dict()
    assert state["excluded_digest"]["count"] == 2, "applied when the loop ended, so the state says so"
    rest = [key for batch in loader for key in batch.keys]
    assert "k000050" not in rest and "k000051" not in rest and len(rest) == 64 - 12 - 2
    loader.set_epoch(1)
    assert sorted(key for batch in loader for key in batch.keys) == [f"k{index:06d}" for index in range(64)]


def test_weights_asked_for_before_a_break_never_land_over_a_checkpoint_loaded_after() -> None:
    loader = _mixed()
    checkpoint = loader.state_dict()
    for number, _batch in enumerate(loader):
        if number == 2:
            loader.set_mixture_weights({"web": 9.0, "books": 1.0})
            break
    loader.load_state_dict(checkpoint)
    fresh = _mixed()
    fresh.load_state_dict(checkpoint)
    assert [key for batch in loader for key in batch.keys] == [key for batch in fresh for key in batch.keys]


@pytest.mark.parametrize(
    "weights",
    [{"web": math.inf, "books": 1.0}, {"web": math.nan, "books": 1.0}, {"web": 1e308, "books": 1e308}, {"web": 10**400, "books": 1}],
    ids=["inf", "nan", "sum-past-float", "int-past-float"],
)
def test_weights_that_cannot_be_drawn_are_refused_by_the_call_and_nothing_is_recorded(weights: dict[str, float]) -> None:
    loader = _mixed()
    with pytest.raises(ConfigurationError, match="finite positive weight"):
        loader.set_mixture_weights(weights)
    iterator = iter(loader)
    next(iterator)
    with pytest.raises(ConfigurationError, match="finite positive weight"):
        loader.set_mixture_weights(weights)  # mid-loop too: refused before it waits
    rest = [key for batch in iterator for key in batch.keys]
    assert len(rest) == 60 and loader.state_dict()["mixture"]["changes"] == []
    with pytest.raises(ConfigurationError, match="finite positive weight"):
        MixedStorage({"web": _memory(4, "w"), "books": _memory(4, "b")}, weights)


def test_two_thousand_exclusions_between_two_batches_are_one_redraw() -> None:
    # Was: each applied on its own under the record lock (26 s for the next batch at 100,000 samples).
    loader = _loader(count=20_000, batch_size=100)
    iterator = iter(loader)
    next(iterator)
    for index in range(1000, 3000):
        loader.exclude(keys=[f"k{index:06d}"])
    rest = [key for batch in iterator for key in batch.keys]
    assert len(rest) == 20_000 - 100 - 2000 and not {f"k{index:06d}" for index in range(1000, 3000)} & set(rest)
    assert loader.verify_epoch()["samples"] == 20_000


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
