"""Grain and stoker both ways: a stoker storage read by Grain's own pipelines, whose iterator
checkpoints stay exact; a Grain data source read by stoker's Loader, each record once an epoch,
with the Loader's exact resume (its bad records: tests/faults/storage/test_adapter_faults.py)."""

from __future__ import annotations

import collections
import itertools

import pytest

from stoker import Loader
from stoker.loader import Sampling
from stoker.storage import MemoryStorage

grain = pytest.importorskip("grain", reason="needs Grain (pip install grain)")

from stoker.jax import GrainStorage, StorageSource  # noqa: E402 - after the skip

SAMPLES = 101


@pytest.fixture
def storage() -> MemoryStorage:
    return MemoryStorage({f"s{index:04d}": f"sample {index}".encode() for index in range(SAMPLES)})


def _decode(data: bytes) -> int:
    return int(data.split()[1])


def test_a_grain_dataset_over_a_stoker_storage_resumes_exactly_from_its_own_state(storage: MemoryStorage) -> None:
    dataset = grain.MapDataset.source(StorageSource(storage)).shuffle(seed=3).map(_decode).batch(4)
    first = iter(dataset.to_iter_dataset())
    read = list(itertools.islice(first, 7))
    state = first.get_state()
    rest = list(first)
    again = iter(dataset.to_iter_dataset())
    again.set_state(state)
    assert [batch.tolist() for batch in again] == [batch.tolist() for batch in rest]
    values = [value for batch in read + rest for value in batch.tolist()]
    assert sorted(values) == list(range(SAMPLES))  # the epoch: each sample once, in Grain's shuffled order
    assert values != sorted(values)


def test_grains_dataloader_over_a_stoker_storage_checkpoints_exactly(storage: MemoryStorage) -> None:
    source = StorageSource(storage)
    sampler = grain.samplers.IndexSampler(len(source), shuffle=True, seed=5, num_epochs=1, shard_options=grain.sharding.NoSharding())
    loader = grain.DataLoader(data_source=source, sampler=sampler, operations=[grain.transforms.Batch(5)], worker_count=0)
    iterator = iter(loader)
    list(itertools.islice(iterator, 3))
    state = iterator.get_state()
    rest = [batch.tolist() for batch in iterator]
    again = iter(loader)
    again.set_state(state)
    assert [batch.tolist() for batch in again] == rest


def test_stokers_loader_over_a_grain_source_delivers_each_record_once_and_resumes() -> None:
    source = pytest.importorskip("grain.python").InMemoryDataSource([f"record {index}".encode() for index in range(SAMPLES)])
    storage = GrainStorage(source)
    loader = Loader(storage, batch_size=8, sampling=Sampling(seed=2, in_order=True))
    stream = iter(loader)
    seen = [bytes(item) for batch in itertools.islice(stream, 4) for item in batch.data]
    state = loader.state_dict()
    stream.close()
    resumed = Loader(GrainStorage(source), batch_size=8, sampling=Sampling(seed=2, in_order=True))
    resumed.load_state_dict(state)
    seen += [bytes(item) for batch in resumed for item in batch.data]
    assert collections.Counter(seen) == collections.Counter(f"record {index}".encode() for index in range(SAMPLES))
