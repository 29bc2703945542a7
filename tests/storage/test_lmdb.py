"""LMDB: offset-index reads equal py-lmdb reads; staleness is detected; Caffe Datums."""

from __future__ import annotations

import random
from pathlib import Path

import lmdb
import pytest

from stoker.ingest import convert_storage, encode_datum
from stoker.storage import FileStorage, LmdbStorage, StaleIndexError, StorageError
from stoker.storage.local import parse_datum


def _write(path: Path, values: dict[bytes, bytes], map_size: int = 1 << 26) -> None:
    environment = lmdb.open(str(path), map_size=map_size)
    with environment.begin(write=True) as transaction:
        for key, value in values.items():
            transaction.put(key, value)
    environment.close()


@pytest.fixture
def database(tmp_path: Path) -> tuple[Path, dict[bytes, bytes]]:
    generator = random.Random(4)
    # Small values live in leaf pages; large ones in overflow pages: both must index right.
    values = {f"key{index:05d}".encode(): generator.randbytes(generator.choice([1, 50, 700, 3000, 20_000])) for index in range(400)}
    path = tmp_path / "db"
    _write(path, values)
    return path, values


def test_explicit_reads_equal_lmdb_reads_for_every_key(database) -> None:
    path, values = database
    explicit = LmdbStorage(path, value_format="raw")
    plain = LmdbStorage(path, mode="lmdb", value_format="raw")
    keys = list(explicit.keys)
    assert keys == [key.decode() for key in sorted(values)]
    assert explicit.read_many(keys) == plain.read_many(keys) == [values[key.encode()] for key in keys]
    shuffled = random.Random(5).sample(keys, len(keys))
    assert explicit.read_many(shuffled) == [values[key.encode()] for key in shuffled]
    explicit.close()
    plain.close()


def test_index_is_persisted_and_reused(database) -> None:
    path, _ = database
    LmdbStorage(path).close()
    index_file = path / "stoker-index.json"
    assert index_file.exists()
    stamp = index_file.stat().st_mtime_ns
    LmdbStorage(path).close()
    assert index_file.stat().st_mtime_ns == stamp, "an unchanged database reuses its index"


def test_index_is_rebuilt_or_refused_after_a_write(database) -> None:
    path, values = database
    LmdbStorage(path).close()
    _write(path, {b"key00003": b"changed value", b"zzz-new": b"new sample"})
    with pytest.raises(StaleIndexError, match="changed"):
        LmdbStorage(path, on_stale="error")
    rebuilt = LmdbStorage(path)
    assert rebuilt.read("key00003") == b"changed value"
    assert rebuilt.read("zzz-new") == b"new sample"
    assert len(rebuilt) == len(values) + 1


def test_write_after_open_is_detected_at_read(database) -> None:
    path, _ = database
    storage = LmdbStorage(path)
    _write(path, {b"key00001": b"x" * 10_000, **{f"grow{index}".encode(): b"y" * 5000 for index in range(50)}})
    with pytest.raises(StaleIndexError, match="changed after it was indexed"):
        storage.read("key00001")


def test_caffe_datums_from_convert(tmp_path: Path, folder) -> None:
    root, samples = folder
    with FileStorage(root) as source:
        convert_storage(source, tmp_path / "train.lmdb", to="lmdb", progress=False, decode_check=False)
    for mode in ("explicit", "lmdb"):
        with LmdbStorage(tmp_path / "train.lmdb", mode=mode) as storage:
            assert storage.value_format == "caffe"
            for key in storage.keys:
                assert storage.read(key) == samples[key][0]
                assert storage.label(key) == samples[key][1]


def test_datum_round_trip() -> None:
    value = encode_datum(b"\xff\xd8jpeg", 7, channels=3, height=10, width=20)
    layout = parse_datum(value)
    assert value[layout.data_offset : layout.data_offset + layout.data_length] == b"\xff\xd8jpeg"
    assert (layout.label, layout.channels, layout.height, layout.width, layout.encoded) == (7, 3, 10, 20, True)
    assert parse_datum(encode_datum(b"", -1)).label == -1
    with pytest.raises(ValueError):
        parse_datum(b"\x22\x10short")


def test_not_an_lmdb(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(StorageError, match="not an LMDB"):
        LmdbStorage(tmp_path / "plain")
    with pytest.raises(FileNotFoundError):
        LmdbStorage(tmp_path / "absent")
