"""Changes asked for around a running loop (`Loader.exclude`, `set_mixture_weights`), as a hostile
pass found them going wrong: never lost, never applied to the wrong epoch or over a loaded
checkpoint, never racing a loop that starts, never accepted when they cannot be drawn."""

from __future__ import annotations

import math
import threading

import pytest

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling, Throughput
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
