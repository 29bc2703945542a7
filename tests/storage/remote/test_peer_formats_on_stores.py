"""The peers' formats read in place from each object store (S3, GCS, Azure, each a real server
on loopback): MDS shards (raw and zstd) and TFRecord files (plain and gzip) put in the bucket as
the peer's own upload would, opened by URL alone, every sample once through the Loader, byte for
byte; the table saved by the first open spares the second every shard."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stoker import Loader
from stoker.errors import StorageError
from stoker.loader import Reads, Sampling
from stoker.storage import LanceStorage, ObjectStorage, open_storage
from stoker_testbed.data.peer_formats import random_samples, write_hf_disk, write_lance, write_litdata, write_mds, write_tfrecords
from stoker_testbed.servers.buckets import TestBucket

pytest.importorskip("streaming", reason="MDS shards are written by MosaicML Streaming: pip install mosaicml-streaming")
pytest.importorskip("tfrecord", reason="TFRecord files are written by the tfrecord package: pip install tfrecord")


def _epoch(storage: ObjectStorage | LanceStorage, shuffle: str) -> Counter[bytes]:
    loader = Loader(storage, batch_size=20, decode=bytes, sampling=Sampling(shuffle=shuffle, seed=1), reads=Reads())  # type: ignore[arg-type]
    try:
        return Counter(data for batch in loader for data in batch.data)
    finally:
        loader.close()


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_mds_shards_on_every_store_deliver_every_sample_once(object_bucket: TestBucket, tmp_path: Path, compression: str | None) -> None:
    samples = random_samples(240, seed=11)
    object_bucket.put_folder(write_mds(tmp_path / "mds", samples, compression=compression, size_limit=120_000), "mds")
    with open_storage(object_bucket.url("mds"), **object_bucket.options()) as storage:
        assert isinstance(storage, ObjectStorage) and storage.layout == "peer" and len(storage) == 240
        shards = len(storage.block_sizes() or [])
        opening = storage.traffic.snapshot()["requests"]["GET"]
        assert list(storage.labels) == [label for _, label in samples]
        assert _epoch(storage, "block" if compression else "uniform") == Counter(payload for payload, _ in samples)
        name = storage.sample_name(5)
        assert name.startswith(f"{object_bucket.store}://{object_bucket.name}/mds/shard.00000.mds") and name.endswith("#5")
        kinds = storage.traffic.snapshot()["requests"]
        if compression is None:
            assert kinds["ranged GET"] >= 240, "a raw shard's samples are read by range"
    with open_storage(object_bucket.url("mds"), **object_bucket.options()) as again:
        requests = again.traffic.snapshot()["requests"]
        assert shards > 1 and requests["GET"] == opening - shards, f"the saved table spares the second open every shard: {requests}"
        assert again.read_indices([7])[0] == samples[7][0]


@pytest.mark.parametrize("compress", [False, True])
def test_tfrecord_files_on_every_store_deliver_every_sample_once(object_bucket: TestBucket, tmp_path: Path, compress: bool) -> None:
    samples = random_samples(150, seed=12)
    write_tfrecords(tmp_path / "records", samples, files=3, compress=compress)
    object_bucket.put_folder(tmp_path / "records", "records")
    with open_storage(object_bucket.url("records"), **object_bucket.options()) as storage:
        assert isinstance(storage, ObjectStorage) and storage.layout == "peer"
        assert storage.payload == "image/encoded" and list(storage.labels) == [label for _, label in samples]
        assert _epoch(storage, "uniform") == Counter(payload for payload, _ in samples)


def test_a_shard_that_index_json_lists_but_the_store_lacks_is_named(object_bucket: TestBucket, tmp_path: Path) -> None:
    folder = write_mds(tmp_path / "mds", random_samples(100), size_limit=30_000)
    (folder / "shard.00001.mds").unlink()
    object_bucket.put_folder(folder, "mds")
    with pytest.raises(
        StorageError,
        match=rf"{object_bucket.store}://{object_bucket.name}/mds/shard\.00001\.mds: listed in index\.json but not in the store",
    ):
        open_storage(object_bucket.url("mds"), **object_bucket.options())


def test_a_save_to_disk_folder_on_every_store_delivers_every_sample_once_with_its_class_names(
    object_bucket: TestBucket, tmp_path: Path
) -> None:
    pytest.importorskip("datasets", reason="the folder is written by Hugging Face datasets: pip install datasets")
    samples = random_samples(120, seed=14)
    object_bucket.put_folder(write_hf_disk(tmp_path / "saved", samples, shards=3), "saved")
    with open_storage(object_bucket.url("saved"), **object_bucket.options()) as storage:
        assert isinstance(storage, ObjectStorage) and storage.layout == "peer" and storage.payload == "image"
        assert storage.classes == [f"c{number}" for number in range(10)] and list(storage.labels) == [label for _, label in samples]
        assert _epoch(storage, "block") == Counter(payload for payload, _ in samples)


@pytest.mark.parametrize("items", [True, False], ids=["items", "arrow rows"])
def test_litdata_chunks_on_every_store_deliver_every_sample_once(object_bucket: TestBucket, tmp_path: Path, items: bool) -> None:
    pytest.importorskip("litdata", reason="the chunks are written by LitData: pip install litdata")
    samples = random_samples(160, seed=17)
    object_bucket.put_folder(write_litdata(tmp_path / "lit", samples, items=items), "lit")
    with open_storage(object_bucket.url("lit"), **object_bucket.options()) as storage:
        assert isinstance(storage, ObjectStorage) and storage.layout == "peer" and storage.payload == "image"
        assert list(storage.labels) == [label for _, label in samples]
        assert _epoch(storage, "uniform") == Counter(payload for payload, _ in samples)


def test_a_lance_dataset_on_each_store_reads_through_lance_with_the_stores_own_settings(object_bucket: TestBucket, tmp_path: Path) -> None:
    pytest.importorskip("lance", reason="Lance datasets are written by Lance: pip install pylance")
    samples = random_samples(150, seed=22)
    object_bucket.put_folder(write_lance(tmp_path / "train.lance", samples), "train.lance")
    with open_storage(object_bucket.url("train.lance"), **object_bucket.options()) as storage:
        assert isinstance(storage, LanceStorage) and len(storage) == 150
        assert list(storage.labels) == [label for _, label in samples]
        assert _epoch(storage, "uniform") == Counter(payload for payload, _ in samples)
