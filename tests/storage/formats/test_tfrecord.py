"""TFRecord files read in place, against the ``tfrecord`` package's own reader: every record's
payload byte for byte and its label, plain and gzip, a folder, one file or a glob, and through
the Loader (every sample once, exact resume)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import ShardError
from stoker.loader import Sampling
from stoker.storage import open_storage, storage_format
from stoker.storage.formats import PeerFormatStorage
from stoker_testbed.data.datasets import resumed_epoch
from stoker_testbed.data.peer_formats import jpeg_samples, random_samples, write_tfrecords

reader = pytest.importorskip("tfrecord.reader", reason="the differential tests need the tfrecord package: pip install tfrecord")


def _theirs(paths: list[Path], compressed: bool) -> list[dict]:
    records = []
    for path in paths:
        records.extend(reader.tfrecord_loader(str(path), None, compression_type="gzip" if compressed else None))
    return records


@pytest.mark.parametrize("compressed", [False, True])
def test_every_record_matches_the_tfrecord_packages_own_reader_byte_for_byte(tmp_path: Path, compressed: bool) -> None:
    paths = write_tfrecords(tmp_path / "records", random_samples(600, seed=4), files=4, compress=compressed)
    theirs = _theirs(paths, compressed)
    assert storage_format(tmp_path / "records") == "tfrecord"
    with open_storage(tmp_path / "records") as storage:
        assert isinstance(storage, PeerFormatStorage) and len(storage) == len(theirs) == 600
        assert (storage.fields.payload, storage.fields.label) == ("image/encoded", "image/class/label")
        for index, data in enumerate(storage.read_indices(range(len(storage)))):
            assert data == bytes(theirs[index]["image/encoded"]), index
            assert storage.labels[index] == int(theirs[index]["image/class/label"][0])
    with PeerFormatStorage(tmp_path / "records", payload="image/format", label="weight") as other:
        assert other.read_indices([3])[0] == b"jpeg" and np.allclose(other.labels[:5], [0.5] * 5)
    with PeerFormatStorage(tmp_path / "records", label="index") as positions:
        assert list(positions.labels) == list(range(600))


def test_one_file_and_a_glob_open_as_the_folder_does(tmp_path: Path) -> None:
    paths = write_tfrecords(tmp_path / "records", jpeg_samples(30), files=3)
    with open_storage(paths[1], label="index") as one:
        assert len(one) == 10 and list(one.labels) == list(range(10, 20))
    with open_storage(str(tmp_path / "records" / "train.tfrecord-0000[02]-of-00003"), label="index") as matched:
        assert len(matched) == 20 and list(matched.labels) == [*range(10), *range(20, 30)]


def test_a_loader_over_tfrecords_delivers_every_sample_once_and_resumes_exactly(tmp_path: Path) -> None:
    samples = random_samples(400, seed=9)
    write_tfrecords(tmp_path / "records", samples, files=5, compress=True)
    delivered = resumed_epoch(lambda: open_storage(tmp_path / "records"), Sampling(shuffle="uniform", seed=3), batch_size=25, stop_after=6)
    assert Counter(delivered) == Counter(payload for payload, _ in samples)


def test_a_record_cut_short_names_the_file_and_the_record(tmp_path: Path) -> None:
    paths = write_tfrecords(tmp_path / "records", random_samples(30), files=1)
    data = paths[0].read_bytes()
    paths[0].write_bytes(data[: len(data) - 100])
    with pytest.raises(ShardError, match=r"train\.tfrecord-00000-of-00001: record 29 at byte \d+ declares \d+ bytes, past the end"):
        open_storage(tmp_path / "records")
