"""Grain's ArrayRecord files read in place through Google's own reader, against Grain's
``ArrayRecordDataSource``: records that are ``tf.train.Example`` (the payload feature byte for
byte, the label) and opaque records (returned whole), through the Loader."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stoker import Loader
from stoker.errors import StorageError
from stoker.loader import Sampling
from stoker.storage import ArrayRecordStorage, open_storage, storage_format
from stoker_testbed.data.peer_formats import random_samples, write_array_record

sources = pytest.importorskip("grain.sources", reason="the differential tests need Grain: pip install grain")
example_pb2 = pytest.importorskip("tfrecord.example_pb2", reason="Examples are built with the tfrecord package's protobuf")


def test_example_records_match_grains_own_source_byte_for_byte(tmp_path: Path) -> None:
    samples = random_samples(500, seed=18)
    paths = write_array_record(tmp_path / "ar", samples, files=3)
    theirs = sources.ArrayRecordDataSource([str(path) for path in paths])
    assert storage_format(tmp_path / "ar") == "array_record"
    with open_storage(tmp_path / "ar") as storage:
        assert isinstance(storage, ArrayRecordStorage) and len(storage) == len(theirs) == 500
        assert (storage.fields.payload, storage.fields.label) == ("image/encoded", "image/class/label")
        for index, data in enumerate(storage.read_indices(range(len(storage)))):
            example = example_pb2.Example.FromString(theirs[index])
            assert data == example.features.feature["image/encoded"].bytes_list.value[0], index
            assert storage.labels[index] == example.features.feature["image/class/label"].int64_list.value[0]
    with ArrayRecordStorage(tmp_path / "ar", label="index") as positions:
        assert list(positions.labels) == list(range(500))


def test_opaque_records_are_returned_whole(tmp_path: Path) -> None:
    samples = random_samples(120, seed=19)
    paths = write_array_record(tmp_path / "ar", samples, files=2, examples=False)
    theirs = sources.ArrayRecordDataSource([str(path) for path in paths])
    with open_storage(paths[0]) as one, open_storage(tmp_path / "ar") as storage:
        assert len(one) == 60 and storage.fields.label is None
        assert storage.read_indices(range(120)) == [theirs[index] for index in range(120)]
        loader = Loader(storage, batch_size=16, decode=bytes, sampling=Sampling(shuffle="block", seed=2))
        assert Counter(data for batch in loader for data in batch.data) == Counter(payload for payload, _ in samples)
        loader.close()


def test_a_file_that_is_not_array_record_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "ar"
    folder.mkdir()
    (folder / "broken.array_record").write_bytes(b"not riegeli" * 100)
    with pytest.raises(StorageError, match=r"broken\.array_record: not an ArrayRecord file"):
        open_storage(folder)
