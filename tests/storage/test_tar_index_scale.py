"""Tar shards at users' scale: opening reads each index's header only, a shard's arrays are read
when one of its samples is, the cache of them stays within its bytes, and keys, labels and reads
agree with the members. Asserted on memory traced by `tracemalloc` (numpy's arrays included),
never on the clock."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.storage import TarShardStorage
from stoker_testbed.data.synthetic import free_decode
from stoker_testbed.data.synthetic_shards import make_sparse_shards

MB = 1 << 20


@pytest.fixture(scope="module")
def ten_million(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sparse_shards(tmp_path_factory.mktemp("scale") / "shards", 10**7, 100_000)


def test_opening_ten_million_members_holds_headers_not_samples(ten_million: Path) -> None:
    tracemalloc.start()
    try:
        storage = TarShardStorage(ten_million)
        opened = tracemalloc.get_traced_memory()[0]
        # One sample read: its shard's arrays (about 50 bytes a member) and nothing of the other 99.
        [data] = storage.try_read_indices([5_000_001])
        after_one = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(storage) == 10**7
    assert opened < 8 * MB, f"opening held {opened / MB:.1f} MB: per-sample data was loaded (the arrays are about 500 MB)"
    assert after_one - opened < 12 * MB, f"one read held {(after_one - opened) / MB:.1f} MB: more than its own shard"
    assert data == bytes(16)
    assert storage.keys[5_000_001] == "00050/00000001" and storage.keys[-1] == "00099/00099999"
    assert storage.labels[5_000_001] == 1
    assert storage.labels[np.array([0, 5_000_001, 9_999_999])].tolist() == [0, 1, 999]


def test_the_index_cache_keeps_within_its_bytes(ten_million: Path) -> None:
    storage = TarShardStorage(ten_million, index_cache_bytes=16 * MB)
    tracemalloc.start()
    try:
        storage.try_read_indices([number * 100_000 + 7 for number in range(40)])  # 40 shards touched
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 24 * MB, f"{held / MB:.0f} MB held for a 16 MB index cache over 40 shards of about 5 MB"
    assert storage.catalog.key(39 * 100_000 + 7) == "00039/00000007"  # a shard let go reads again


def test_a_loader_delivers_a_ten_million_member_epoch_from_its_first_batch(ten_million: Path) -> None:
    storage = TarShardStorage(ten_million)
    loader = Loader(storage, batch_size=256, decode=free_decode)
    batches = iter(loader)
    seen = [key for _, batch in zip(range(8), batches) for key in batch.keys]
    assert len(seen) == len(set(seen)) == 8 * 256
    shards = {key.split("/")[0] for key in seen}
    assert len(shards) > 50, "a uniform shuffle over the whole epoch, not a shard at a time"
    state = loader.state_dict()
    assert len(str(state)) < 1 << 20
    resumed = Loader(TarShardStorage(ten_million), batch_size=256, decode=free_decode)
    resumed.load_state_dict(state)  # the fingerprint comes from the headers' digests
    following = next(iter(resumed)).keys
    assert not set(following) & set(seen)


def test_finding_a_spikes_keys_among_ten_million_holds_the_keys_asked_for_not_a_table(ten_million: Path) -> None:
    storage = TarShardStorage(ten_million, index_cache_bytes=16 * MB)  # the shards' arrays held apart from what is measured
    positions = [17, 4_200_000, 9_999_999, 5_000_001]
    keys = [storage.keys[position] for position in positions] + ["not-a-key"]
    tracemalloc.start()
    try:
        found, unknown = storage.indices_of(keys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.tolist() == positions and unknown == ["not-a-key"]
    assert peak < 48 * MB, f"finding 5 keys held {peak / MB:.0f} MB: a table of every key was built (about 1 GB)"
    assert [storage.index_of(key) for key in keys[:2]] == positions[:2]  # the table, when asked for, agrees
