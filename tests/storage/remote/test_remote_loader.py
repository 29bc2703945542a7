"""The Loader over real network storage: out-of-order incremental prefetch delivers every sample
exactly once with its label, in order and out of order, ramps up slowly, keeps going past a
stalled connection, and resumes exactly."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from stoker.ingest import upload_to_cassandra, upload_to_s3
from stoker.loader import Loader, Reads, Sampling
from stoker.storage import CassandraConnection, CassandraStorage, MemoryStorage, RemoteStorage, S3Storage, SubsetStorage
from stoker_testbed.data.datasets import dataset, unique
from stoker_testbed.servers.s3_server import S3Server


@pytest.fixture(params=["s3", "cassandra"])
def remote(request: pytest.FixtureRequest) -> Iterator[tuple[RemoteStorage, MemoryStorage]]:
    """The same 150-sample dataset in one of the two network stores."""
    source = dataset(150)
    if request.param == "s3":
        server: S3Server = request.getfixturevalue("s3_server")
        bucket = unique("loader-")
        server.create_bucket(bucket)
        upload_to_s3(source, f"s3://{bucket}/d", progress=False, decode_check=False, **server.options())
        storage: RemoteStorage = S3Storage(f"s3://{bucket}/d", **server.options())
    else:
        connection: CassandraConnection = request.getfixturevalue("keyspace_connection")
        upload_to_cassandra(source, connection, progress=False, decode_check=False)
        storage = CassandraStorage(connection)
    with storage:
        yield storage, source


def delivered(loader: Loader) -> list[tuple[str, bytes, int]]:
    out = []
    for batch in loader:
        for key, data, label, valid in zip(batch.keys, batch.data, batch.labels.tolist(), batch.valid.tolist()):
            assert valid
            out.append((key, data, label))
    return out


@pytest.mark.parametrize("in_order", [False, True])
def test_every_sample_exactly_once_with_its_label(remote: tuple[RemoteStorage, MemoryStorage], in_order: bool) -> None:
    storage, source = remote
    loader = Loader(storage, batch_size=16, sampling=Sampling(in_order=in_order, seed=3))
    assert loader.sample_prefetch
    got = delivered(loader)
    assert Counter(key for key, _, _ in got) == Counter(source.keys)
    truth = {key: (data, label) for key, data, label in zip(source.keys, source.read_many(source.keys), source.labels)}
    assert all(truth[key] == (data, label) for key, data, label in got)
    if in_order:  # in order: exactly the sampler's order
        plan_keys = [storage.keys[index] for index in loader.sampler.plan_arrays().indices.tolist()]
        assert not plan_keys  # the epoch is fully delivered
        loader.set_epoch(0)
        order = [storage.keys[index] for index in loader.sampler.plan_arrays().indices.tolist()]
        assert [key for key, _, _ in got] == order


def test_slow_start_ramps_one_batch_every_four_from_two(remote: tuple[RemoteStorage, MemoryStorage]) -> None:
    storage, _ = remote
    loader = Loader(storage, batch_size=5, reads=Reads(fetch_concurrency=6, ramp_every=4, stall_patience=60))  # no stall help
    delivered(loader)
    assert loader.prefetcher is not None
    history = loader.prefetcher.in_flight_history
    # Two batches first (the first batch is filled by the faster half), one more every 4
    # consumed, capped at 6, then down as the epoch runs out.
    assert history[:12] == [2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5]
    assert max(history) == 6


def test_resume_mid_epoch_neither_loses_nor_repeats(remote: tuple[RemoteStorage, MemoryStorage]) -> None:
    storage, source = remote
    loader = Loader(storage, batch_size=10, sampling=Sampling(seed=5))
    first: list[str] = []
    for number, batch in enumerate(loader):
        first.extend(batch.keys)
        if number == 4:
            break  # batches in flight are dropped, not delivered
    state = loader.state_dict()
    resumed = Loader(storage, batch_size=10, sampling=Sampling(seed=5))
    resumed.load_state_dict(state)
    rest = [key for key, _, _ in delivered(resumed)]
    assert Counter(first + rest) == Counter(source.keys)


def test_a_split_of_a_remote_store_is_prefetched_too(remote: tuple[RemoteStorage, MemoryStorage]) -> None:
    storage, source = remote
    chosen = sorted(storage.keys)[::3]
    subset = SubsetStorage(storage, chosen)
    loader = Loader(subset, batch_size=8)
    assert loader.sample_prefetch
    assert sorted(key for key, _, _ in delivered(loader)) == chosen


class StallingStorage(SubsetStorage):
    """All of a remote store, except that one sample's fetch hangs until released."""

    def __init__(self, base: RemoteStorage, stalled_key: str) -> None:
        super().__init__(base, list(base.keys))
        self.stalled = base.index_of(stalled_key)
        self.release = threading.Event()

    async def fetch_index(self, index: int) -> bytes:
        if index == self.stalled:
            while not self.release.is_set():
                await asyncio.sleep(0.01)
        return await super().fetch_index(index)


def test_out_of_order_batches_complete_while_one_request_is_stalled(remote: tuple[RemoteStorage, MemoryStorage]) -> None:
    storage, source = remote
    probe = Loader(storage, batch_size=10, sampling=Sampling(seed=1))
    first_key = storage.keys[probe.sampler.plan_arrays().indices[0]]  # in the very first batch requested
    stalling = StallingStorage(storage, first_key)
    loader = Loader(stalling, batch_size=10, sampling=Sampling(seed=1), reads=Reads(fetch_concurrency=4))
    keys: list[str] = []
    for number, batch in enumerate(loader):
        keys.extend(batch.keys)
        if number == 3:
            assert first_key not in keys  # four batches delivered while it hangs
            stalling.release.set()
    assert Counter(keys) == Counter(source.keys)
