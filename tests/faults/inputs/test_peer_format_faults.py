"""Bad peer datasets: each fails with a named error (the file, and the sample or record where
there is one), never a hang, a crash or an allocation past what the index declares; a damaged
saved table is never trusted."""

from __future__ import annotations

import json
import logging
import zlib
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import ShardError, StorageError
from stoker.storage import cache_dir
from stoker.storage.formats import PeerFormatStorage
from stoker_testbed.data.peer_formats import random_samples, write_mds, write_tfrecords

pytest.importorskip("streaming", reason="MDS shards are written by MosaicML Streaming: pip install mosaicml-streaming")
pytest.importorskip("tfrecord", reason="TFRecord files are written by the tfrecord package: pip install tfrecord")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path / "cache"))


def _mds(tmp_path: Path, compression: str | None = None) -> Path:
    return write_mds(tmp_path / "mds", random_samples(120, seed=1), compression=compression, size_limit=60_000)


def _index(folder: Path) -> dict:
    return json.loads((folder / "index.json").read_text())


def test_a_truncated_shard_is_named_with_its_declared_size(tmp_path: Path) -> None:
    folder = _mds(tmp_path)
    shard = folder / "shard.00001.mds"
    shard.write_bytes(shard.read_bytes()[:-500])
    with pytest.raises(StorageError, match=r"shard\.00001\.mds: \d+ bytes, .*index\.json declares \d+ \(truncated or rewritten\?\)"):
        PeerFormatStorage(folder)


def test_a_truncated_compressed_shard_is_named(tmp_path: Path) -> None:
    folder = _mds(tmp_path, "zstd")
    index = _index(folder)
    shard = folder / index["shards"][0]["zip_data"]["basename"]
    cut = shard.read_bytes()[:-40]
    shard.write_bytes(cut)
    index["shards"][0]["zip_data"]["bytes"] = len(cut)  # the index agrees: only the data is short
    (folder / "index.json").write_text(json.dumps(index))
    with pytest.raises(ShardError, match=r"shard\.00000\.mds\.zstd"):
        PeerFormatStorage(folder)


def test_an_index_listing_a_shard_that_is_not_there_is_named(tmp_path: Path) -> None:
    folder = _mds(tmp_path)
    (folder / "shard.00002.mds").unlink()
    with pytest.raises(StorageError, match=r"shard\.00002\.mds: listed in .*index\.json but cannot be read"):
        PeerFormatStorage(folder)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: (999_999).to_bytes(4, "little") + data[4:], r"holds 999999 samples, its index says \d+"),
        (lambda data: data[:8] + (2**32 - 1).to_bytes(4, "little") + data[12:], r"sample offsets out of order or past its \d+ bytes"),
        (lambda data: data[:4] + (5).to_bytes(4, "little") + data[8:], r"sample offsets out of order or past"),
    ],
    ids=["sample count", "an offset past the end", "an offset inside the header"],
)
def test_a_damaged_shard_header_is_named(tmp_path: Path, damage: object, message: str) -> None:
    folder = _mds(tmp_path)
    shard = folder / "shard.00000.mds"
    shard.write_bytes(damage(shard.read_bytes()))  # type: ignore[operator]
    with pytest.raises(ShardError, match=rf"shard\.00000\.mds: .*{message}"):
        PeerFormatStorage(folder)


def test_sizes_inside_a_sample_that_do_not_add_up_name_the_sample(tmp_path: Path) -> None:
    folder = _mds(tmp_path)
    shard = folder / "shard.00000.mds"
    data = bytearray(shard.read_bytes())
    third = int.from_bytes(data[4 + 4 * 3 : 8 + 4 * 3], "little")  # where sample 3 begins
    data[third : third + 4] = (10**6).to_bytes(4, "little")  # its first column's size
    shard.write_bytes(bytes(data))
    with pytest.raises(ShardError, match=r"shard\.00000\.mds: sample 3's column sizes do not add up"):
        PeerFormatStorage(folder)


def test_a_compressed_shard_inflating_past_its_declared_size_stops_at_the_bound(tmp_path: Path) -> None:
    import zstandard

    folder = _mds(tmp_path, "zstd")
    index = _index(folder)
    bomb = zstandard.ZstdCompressor().compress(bytes(512 << 20))  # 512 MB of zeros in a few KB
    shard = folder / index["shards"][0]["zip_data"]["basename"]
    shard.write_bytes(bomb)
    index["shards"][0]["zip_data"]["bytes"] = len(bomb)
    (folder / "index.json").write_text(json.dumps(index))
    declared = index["shards"][0]["raw_data"]["bytes"]
    with pytest.raises(ShardError, match=rf"shard\.00000\.mds\.zstd: inflates past {declared} bytes"):
        PeerFormatStorage(folder)


def test_a_gzip_tfrecord_inflating_past_the_limit_stops_there(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    folder.mkdir()
    compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    (folder / "bomb.tfrecord.gz").write_bytes(compressor.compress(bytes(256 << 20)) + compressor.flush())
    with pytest.raises(ShardError, match=r"bomb\.tfrecord\.gz: inflates past 1048576 bytes"):
        PeerFormatStorage(folder, max_file_bytes=1 << 20)


@pytest.mark.parametrize("name", ["../../outside.mds", "/etc/passwd", "a/../../b.mds"])
def test_a_shard_name_leaving_the_dataset_folder_is_refused(tmp_path: Path, name: str) -> None:
    folder = _mds(tmp_path)
    index = _index(folder)
    index["shards"][0]["raw_data"]["basename"] = name
    (folder / "index.json").write_text(json.dumps(index))
    with pytest.raises(StorageError, match=r"index\.json \(shard 0\): a shard name .* outside the dataset's folder"):
        PeerFormatStorage(folder)


@pytest.mark.parametrize(
    "document",
    [
        b"{",
        b"[]",
        b'{"shards": []}',
        b'{"shards": [{"format": "mds", "version": 1}]}',
        b'{"shards": [{"format": "mds", "column_names": 5}]}',
    ],
    ids=["not JSON", "a list", "no shards", "version 1", "columns not a list"],
)
def test_an_index_that_is_not_mds_version_2_is_named(tmp_path: Path, document: bytes) -> None:
    folder = _mds(tmp_path)
    (folder / "index.json").write_bytes(document)
    with pytest.raises(StorageError, match=r"index\.json"):
        PeerFormatStorage(folder)


def test_a_record_that_is_not_an_example_names_the_file_and_record(tmp_path: Path) -> None:
    paths = write_tfrecords(tmp_path / "records", random_samples(10), files=1)
    data = bytearray(paths[0].read_bytes())
    length = int.from_bytes(data[:8], "little")
    position = 16 + length  # record 1
    data[position + 12 : position + 14] = b"\xff\xff"  # its Example's first bytes: a field of wire type 7
    paths[0].write_bytes(bytes(data))
    with pytest.raises(ShardError, match=r"train\.tfrecord-00000-of-00001: record 1 \(at byte \d+\)"):
        PeerFormatStorage(tmp_path / "records")


def test_a_damaged_saved_table_is_rebuilt_from_the_data_not_trusted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    samples = random_samples(120, seed=1)
    folder = _mds(tmp_path)
    with PeerFormatStorage(folder) as first:
        key = first.content_digest()
    saved = cache_dir("formats") / key / "offsets.npy"
    offsets = np.load(saved)
    offsets[5] = 2**40  # a span far past its file
    np.save(saved, offsets)
    with caplog.at_level(logging.WARNING, logger="stoker.storage"), PeerFormatStorage(folder) as again:
        assert again.read_indices(range(120)) == [payload for payload, _ in samples]
    assert any(
        "reaching past the end of shard.00000.mds" in record.getMessage() and "built again" in record.getMessage()
        for record in caplog.records
    )
