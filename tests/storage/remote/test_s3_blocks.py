"""Block streaming from S3 (real s3proxy): every sample once per epoch for any block size and
world size, one GET per block, exact resume.
Blocks that fail mid-read: tests/faults/storage/test_block_streaming_faults.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stoker.ingest import upload_to_s3
from stoker.loader import Loader, Sampling
from stoker.storage import RetryPolicy, S3Storage, SampleCache
from stoker_testbed.data.datasets import dataset, epoch_contents
from stoker_testbed.servers.s3_server import S3Server

PATIENT = RetryPolicy(attempts=20, base_delay=0.01, max_delay=0.2, deadline=60)


def expected_bytes(count: int) -> dict[str, bytes]:
    source = dataset(count)
    return {key.rsplit(".", 1)[0]: data for key, data in zip(source.keys, source.read_many(source.keys))}  # type: ignore[misc]


@pytest.fixture
def shards(s3_server: S3Server, bucket: str) -> str:
    upload_to_s3(
        dataset(300), f"s3://{bucket}/d", to="shards", shard_size=60_000, progress=False, decode_check=False, **s3_server.options()
    )
    return f"s3://{bucket}/d"


@pytest.mark.parametrize("block_bytes", [4_000, 25_000, 1 << 30])
@pytest.mark.parametrize("world_size", [1, 3])
def test_every_sample_once_per_epoch_for_any_block_size_and_world(
    s3_server: S3Server, shards: str, block_bytes: int, world_size: int
) -> None:
    expected = expected_bytes(300)
    delivered: Counter[str] = Counter()
    for rank in range(world_size):
        with S3Storage(shards, block_bytes=block_bytes, **s3_server.options()) as storage:
            loader = Loader(
                storage, batch_size=16, sampling=Sampling(shuffle="block", shuffle_window=2, rank=rank, world_size=world_size, seed=1)
            )
            for batch in loader:
                for key, data, padding in zip(batch.keys, batch.data, batch.padding):
                    assert data == expected[key]
                    delivered[key] += 0 if padding else 1
            blocks = storage.block_sizes()
            fetches = storage.stats()["block_fetches"]
        # Each block once, plus at most one per sample of the next epoch's first batches, which
        # are requested before this epoch ends (8 batches of 16 in flight at most).
        assert blocks is not None and fetches <= len(blocks) + 8 * 16, "no block fetched twice in the epoch"
    assert delivered == Counter(expected.keys())


def test_one_get_per_block_instead_of_one_per_sample(s3_server: S3Server, shards: str) -> None:
    with S3Storage(shards, block_bytes=30_000, **s3_server.options()) as storage:
        storage.stream_blocks()
        storage.read_many(list(storage.keys))
        blocks = storage.block_sizes()
        assert blocks is not None and storage.stats()["block_fetches"] == len(blocks) < len(storage) / 5
        assert storage.stats()["block_bytes_held"] == 0, "a block leaves memory once all its samples were served"


def test_resume_mid_epoch_with_block_streaming_is_exact(s3_server: S3Server, shards: str) -> None:
    delivered: list[str] = []
    with S3Storage(shards, block_bytes=20_000, **s3_server.options()) as storage:
        loader = Loader(storage, batch_size=10, sampling=Sampling(shuffle="block", seed=5))
        for count, batch in enumerate(loader, start=1):
            delivered.extend(batch.keys)
            if count == 7:
                break
        state = loader.state_dict()
    with S3Storage(shards, block_bytes=20_000, **s3_server.options()) as storage:
        resumed = Loader(storage, batch_size=10, sampling=Sampling(shuffle="block", seed=5))
        resumed.load_state_dict(state)
        delivered.extend(key for batch in resumed for key in batch.keys)
    assert Counter(delivered) == Counter(expected_bytes(300).keys())


def test_later_epochs_read_whole_blocks_from_the_local_cache(s3_server: S3Server, shards: str, tmp_path: Path) -> None:
    expected = expected_bytes(300)

    def epoch(loader: Loader) -> Counter[str]:
        return epoch_contents(loader, expected)

    with S3Storage(shards, block_bytes=20_000, cache_dir=tmp_path, **s3_server.options()) as storage:
        loader = Loader(storage, batch_size=16, sampling=Sampling(shuffle="block", seed=4))
        assert epoch(loader) == Counter(expected.keys())
        blocks = storage.block_sizes()
        assert blocks is not None and storage.stats()["block_downloads"] == len(blocks)
        assert epoch(loader) == Counter(expected.keys())
        assert storage.stats()["block_downloads"] == len(blocks), "epoch 1 read every block from the cache"
    assert len(SampleCache(tmp_path, 10 << 20)) == len(blocks), "one entry a block"
    with S3Storage(shards, block_bytes=20_000, cache_dir=tmp_path, **s3_server.options()) as storage:
        assert epoch(Loader(storage, batch_size=16, sampling=Sampling(shuffle="block", seed=4))) == Counter(expected.keys())
        assert storage.stats()["block_downloads"] == 0, "a new run on the same cache reads no block from the server"
