"""JSON files from outside, read through the one bounded reader: nested thousands deep, an index of
gigabytes, a declared size of 2**62. Each is a named StokerError naming the file (never a
RecursionError, a MemoryError or a read of the whole file), or, where the file is optional
metadata, a warning naming it and the data read without it."""

from __future__ import annotations

import json
import logging
import resource
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from stoker.distributed import read_state_file
from stoker.errors import ConfigurationError, ProvenanceError, ShardError, StorageError
from stoker.loader.state import KeyList, write_key_list
from stoker.storage import open_storage
from stoker.storage.formats import PeerFormatStorage
from stoker_testbed.data.peer_formats import random_samples, write_hf_disk, write_mds

DEEP = b"[" * 100_000 + b"]" * 100_000  # 200 KB, nested 100,000 deep: a RecursionError to json.loads


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path / "cache"))


def _peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_a_deeply_nested_mds_index_is_named(tmp_path: Path) -> None:
    pytest.importorskip("streaming")
    folder = write_mds(tmp_path / "mds", random_samples(20, seed=1), size_limit=1 << 20)
    (folder / "index.json").write_bytes(b'{"shards": ' + DEEP + b"}")
    with pytest.raises(StorageError, match=r"index\.json: JSON nested too deep \(100,001 levels, past the 64 stoker reads\)"):
        open_storage(folder)


def test_a_deeply_nested_litdata_index_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "lit"
    folder.mkdir()
    (folder / "chunk-0-0.bin").write_bytes(b"\0" * 64)
    (folder / "index.json").write_bytes(b'{"config": {}, "chunks": ' + DEEP + b"}")
    with pytest.raises(StorageError, match=r"index\.json: JSON nested too deep"):
        open_storage(folder)


def test_a_litdata_tree_spec_nested_deep_inside_its_string_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "lit"
    folder.mkdir()
    (folder / "chunk-0-0.bin").write_bytes(b"\0" * 64)
    spec = '{"type": "builtins.dict", "context": "[]", "children_spec": ' + "[" * 5000 + "]" * 5000 + "}"
    index = {"config": {"data_format": ["bytes"], "data_spec": spec}, "chunks": [{"filename": "chunk-0-0.bin", "chunk_size": 1}]}
    (folder / "index.json").write_text(json.dumps(index))
    with pytest.raises(StorageError, match=r"index\.json: its data_spec: JSON nested too deep"):
        PeerFormatStorage(folder)


def test_a_sparse_index_of_gigabytes_is_refused_by_its_size_not_read(tmp_path: Path) -> None:
    pytest.importorskip("streaming")
    folder = write_mds(tmp_path / "mds", random_samples(20, seed=1), size_limit=1 << 20)
    with open(folder / "index.json", "r+b") as file:
        file.truncate(4 << 30)  # its JSON, then 4 GB of holes: nothing on disk
    before = _peak_kb()
    with pytest.raises(
        StorageError, match=r"index\.json: 4,294,967,296 bytes, over the 268,435,456 bytes stoker reads as a dataset's index\.json"
    ):
        open_storage(folder)
    assert _peak_kb() - before < 200_000, "KB: the index was not read"


def test_a_tar_index_of_json_form_of_a_gigabyte_is_refused_by_its_size(tmp_path: Path) -> None:
    from stoker.storage.local import load_index

    shard = tmp_path / "shard-000000.tar"
    shard.write_bytes(bytes(10240))
    index = tmp_path / "shard-000000.tar.idx"
    with open(index, "wb") as file:
        file.write(b"{")
        file.truncate(1 << 30)
    before = _peak_kb()
    with pytest.raises(ShardError, match=r"shard-000000\.tar\.idx: .* of 1,073,741,824 bytes, over the 268,435,456 stoker reads"):
        load_index(shard, index)
    assert _peak_kb() - before < 200_000, "KB: the index was not read"


def test_an_mds_shard_declaring_two_to_the_62_bytes_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    pytest.importorskip("streaming")
    import zstandard

    folder = write_mds(tmp_path / "mds", random_samples(20, seed=1), compression="zstd", size_limit=1 << 20)
    index = json.loads((folder / "index.json").read_text())
    bomb = zstandard.ZstdCompressor().compress(bytes(256 << 20))  # 256 MB of zeros in a few KB
    shard = folder / index["shards"][0]["zip_data"]["basename"]
    shard.write_bytes(bomb)
    index["shards"][0]["zip_data"]["bytes"] = len(bomb)
    index["shards"][0]["raw_data"]["bytes"] = 1 << 62
    (folder / "index.json").write_text(json.dumps(index))
    before = _peak_kb()
    with pytest.raises(
        ShardError, match=r"shard\.00000\.mds\.zstd: its index declares 4,611,686,018,427,387,904 bytes once inflated, over the"
    ):
        PeerFormatStorage(folder)
    assert _peak_kb() - before < 100_000, "KB: nothing was inflated"


def test_a_deeply_nested_save_to_disk_state_is_named(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    folder = write_hf_disk(tmp_path / "saved", random_samples(10, seed=2), shards=1)
    (folder / "state.json").write_bytes(b'{"_data_files": ' + DEEP + b"}")
    with pytest.raises(StorageError, match=r"state\.json: JSON nested too deep"):
        open_storage(folder)


def test_a_deeply_nested_dataset_info_is_named_in_a_warning_and_the_data_read_without_class_names(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("datasets")
    folder = write_hf_disk(tmp_path / "saved", random_samples(10, seed=2), shards=1)
    (folder / "dataset_info.json").write_bytes(b'{"features": ' + DEEP + b"}")
    with caplog.at_level(logging.WARNING, logger="stoker.storage"):
        storage = open_storage(folder)
    assert len(storage) == 10 and storage.classes is None
    assert any("dataset_info.json: JSON nested too deep" in record.getMessage() for record in caplog.records), caplog.text
    storage.close()


def test_a_key_list_whose_metadata_is_nested_deep_is_named(tmp_path: Path) -> None:
    path = write_key_list(tmp_path / "keys.parquet", ["a", "b"], dataset="d1", blocks=None)
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"stoker.key_list": DEEP}), path)
    with pytest.raises(ProvenanceError, match=r"keys\.parquet is not a key list: .*keys\.parquet: its metadata: JSON nested too deep"):
        KeyList(path, dataset="d1", samples=2)


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"version": 1, "sampler": ' + DEEP + b"}", "JSON nested too deep"),
        (b'{"version": 1, "step": ' + b"9" * 5000 + b"}", "a number of 5,000 digits"),
    ],
    ids=["nested deep", "a number of 5,000 digits"],
)
def test_a_saved_state_file_that_json_cannot_read_is_refused_by_name(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "loader-state.json"
    path.write_bytes(content)
    with pytest.raises(ConfigurationError, match=rf"loader-state\.json: not a loader state file \({message}"):
        read_state_file(path)
