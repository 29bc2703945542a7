"""The Loader tuned live: tuning moves how much runs at once, never what is delivered: exact resume
and a deterministic order hold while the tuner moves, and a pinned knob is never moved."""

from __future__ import annotations

import time
from typing import Any

from stoker import Loader
from stoker.loader import Reads, Sampling, Throughput
from stoker.storage import MemoryStorage


def slow_decode(data: bytes) -> bytes:
    time.sleep(0.001)  # waits, as a read or a remote decode would: the tuner raises decode
    return data


def storage(count: int = 3000) -> MemoryStorage:
    return MemoryStorage({f"k{index}": index.to_bytes(4, "little") for index in range(count)})


def tuned_loader(store: MemoryStorage, **options: Any) -> Loader:
    loader = Loader(store, batch_size=8, decode=slow_decode, **options)
    assert loader._tuning is not None
    loader._tuning.window = 0.1  # a move every tenth of a second, so a short test sees several
    return loader


def test_exact_resume_while_the_tuner_moves() -> None:
    store = storage()
    loader = tuned_loader(store, sampling=Sampling(seed=3))
    delivered: list[str] = []
    for number, batch in enumerate(loader):
        delivered += batch.keys
        if number == 200:
            state = loader.state_dict()
            break
    moves = loader.stats().tuning  # type: ignore[union-attr]
    assert moves, "the tuner moved while the epoch ran"
    resumed = tuned_loader(store, sampling=Sampling(seed=3))
    resumed.load_state_dict(state)
    rest = [key for batch in resumed for key in batch.keys]
    assert sorted(delivered + rest) == sorted(store.keys), "every sample exactly once"


def test_the_delivered_order_is_the_same_with_and_without_tuning() -> None:
    store = storage(2000)
    tuned = tuned_loader(store, sampling=Sampling(seed=5, in_order=True))
    fixed = Loader(store, batch_size=8, decode=slow_decode, sampling=Sampling(seed=5, in_order=True), throughput=Throughput(autotune=False))
    tuned_keys = [key for batch in tuned for key in batch.keys]
    assert tuned.stats().tuning, "the tuner moved"  # type: ignore[union-attr]
    assert tuned_keys == [key for batch in fixed for key in batch.keys]
    assert fixed.stats().tuning == []  # type: ignore[union-attr]


def test_pinned_knobs_are_never_moved() -> None:
    store = storage(2000)
    loader = tuned_loader(store, throughput=Throughput(decode_concurrency=1, prefetch=1), reads=Reads(fetch_concurrency=3))
    keys = [key for batch in loader for key in batch.keys]
    assert sorted(keys) == sorted(store.keys)
    assert loader.stats().tuning == []  # type: ignore[union-attr]
    assert (loader.decode_concurrency, loader.fetch_concurrency, loader.prefetch) == (1, 3, 1)


def test_the_moves_show_in_the_stats_table() -> None:
    loader = tuned_loader(storage(2000))
    for _ in loader:
        pass
    stats = loader.stats()
    assert stats is not None and stats.tuning
    assert "tuned live" in stats.format_table()
    assert stats.as_dict()["tuning"][0]["knob"] in {"decode concurrency", "fetch concurrency", "prefetch"}
