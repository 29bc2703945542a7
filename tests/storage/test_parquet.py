"""Parquet: conversion round trip, random access equal to pyarrow's reads, Hugging Face layouts,
and row groups as the blocks of the block shuffle."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.ingest import convert_storage
from stoker.loader import Loader, Reads, Sampling
from stoker.storage import FileStorage, ParquetStorage, TarShardStorage, open_storage, storage_format
from stoker_testbed.data.datasets import make_folder

pa = pytest.importorskip("pyarrow")
parquet = pytest.importorskip("pyarrow.parquet")


def huggingface_file(path: Path, rows: list[tuple[bytes | None, str]], *, row_group_size: int, class_label: bool = True) -> None:
    """A file as ``datasets`` writes an image classification split: an ``Image`` struct column
    and a ``ClassLabel`` (or a plain string column of class names)."""
    names = sorted({label for _, label in rows})
    features: dict = {"image": {"_type": "Image"}}
    if class_label:
        features["label"] = {"names": names, "_type": "ClassLabel"}
        labels = pa.array([names.index(label) for _, label in rows], pa.int64())
    else:
        labels = pa.array([label for _, label in rows], pa.string())
    images = pa.array(
        [None if data is None else {"bytes": data, "path": f"{number}.jpg"} for number, (data, _) in enumerate(rows)],
        pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
    )
    metadata = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    table = pa.table({"image": images, "label": labels}).replace_schema_metadata(metadata)
    parquet.write_table(table, path, row_group_size=row_group_size)


def test_conversion_round_trip_keeps_keys_bytes_labels_and_classes(tmp_path: Path) -> None:
    samples = make_folder(tmp_path / "folder", classes=3, per_class=40)
    with FileStorage(tmp_path / "folder") as source:
        report = convert_storage(
            source, tmp_path / "out", to="parquet", shard_size=60_000, row_group_size=20_000, progress=False, decode_check=False
        )
        classes = source.classes
    assert report.format == "parquet" and report.samples == 120 and report.shards > 1
    assert storage_format(tmp_path / "out") == "parquet"
    with open_storage(tmp_path / "out") as written:
        assert isinstance(written, ParquetStorage)
        assert written.classes == classes
        assert sorted(written.keys) == sorted(samples)
        keys = list(written.keys)
        random.Random(0).shuffle(keys)
        for key, data in zip(keys, written.read_many(keys)):
            assert data == samples[key][0]
            assert written.label(key) == samples[key][1]
        assert len(written.block_sizes()) > report.shards, "several row groups per file"


def test_random_access_equals_pyarrow(tmp_path: Path) -> None:
    rows = [(bytes([index % 251]) * (index + 1), f"class_{index % 4}") for index in range(97)]
    huggingface_file(tmp_path / "train.parquet", rows, row_group_size=10)
    table = parquet.read_table(tmp_path / "train.parquet")
    expected = [row["bytes"] for row in table.column("image").to_pylist()]
    with ParquetStorage(tmp_path / "train.parquet") as storage:
        order = list(range(97))
        random.Random(1).shuffle(order)
        assert storage.read_indices(order) == [expected[index] for index in order]
        assert storage.classes == ["class_0", "class_1", "class_2", "class_3"]
        assert list(storage.labels) == table.column("label").to_pylist()
        assert storage.keys[5] == "train.parquet#5"
        assert storage.block_sizes() == [10] * 9 + [7]


def test_string_labels_become_classes_and_columns_can_be_named(tmp_path: Path) -> None:
    rows = [(b"x" * (index + 1), ["dog", "cat", "bird"][index % 3]) for index in range(12)]
    huggingface_file(tmp_path / "a.parquet", rows, row_group_size=5, class_label=False)
    with ParquetStorage(tmp_path / "a.parquet") as storage:
        assert storage.classes == ["bird", "cat", "dog"]
        assert [storage.classes[label] for label in storage.labels] == [label for _, label in rows]  # type: ignore[index]
    with ParquetStorage(tmp_path / "a.parquet", image_column="image", label_column="") as unlabeled:
        assert set(unlabeled.labels) == {None}


def test_folder_of_files_in_huggingface_data_layout(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    for part in range(3):
        rows = [(f"{part}-{row}".encode(), f"c{row % 2}") for row in range(8)]
        huggingface_file(tmp_path / "data" / f"train-{part:05d}-of-00003.parquet", rows, row_group_size=3)
    assert storage_format(tmp_path) == "parquet"
    with open_storage(tmp_path) as storage:
        assert len(storage) == 24
        assert storage.read_indices([0, 8, 23]) == [b"0-0", b"1-0", b"2-7"]
        assert storage.block_sizes() == [3, 3, 2] * 3


def test_block_shuffle_reads_each_row_group_about_once_where_a_uniform_one_rereads(tmp_path: Path) -> None:
    rows = [(bytes(1000), f"c{index % 5}") for index in range(2000)]
    huggingface_file(tmp_path / "big.parquet", rows, row_group_size=100)
    group_bytes = 100 * 1000
    seen: list[int] = []
    with ParquetStorage(tmp_path / "big.parquet", cache_bytes=6 * group_bytes) as storage:
        loader = Loader(
            storage, batch_size=25, sampling=Sampling(shuffle="block", shuffle_window=2, seed=3), reads=Reads(fetch_concurrency=2)
        )
        for batch in loader:
            seen.extend(storage.index_of(key) for key in batch.keys)
        block_reads = storage.stats()["row_groups_read"]
    assert sorted(seen) == list(range(2000)), "every row once"
    assert block_reads == 20, "each of the 20 row groups read once in the epoch"
    with ParquetStorage(tmp_path / "big.parquet", cache_bytes=6 * group_bytes) as storage:
        for _batch in Loader(storage, batch_size=25, sampling=Sampling(shuffle="uniform", seed=3), reads=Reads(fetch_concurrency=2)):
            pass
        assert storage.stats()["row_groups_read"] > 5 * 20, "a uniform shuffle re-reads row groups a small cache lost"


def test_the_block_shuffle_mixes_no_more_row_groups_than_the_cache_holds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Row groups as large as Hugging Face's (100 MB against a 512 MB cache), scaled down.
    rows = [(bytes([index % 251]) * 1000, f"c{index % 5}") for index in range(2000)]
    huggingface_file(tmp_path / "big.parquet", rows, row_group_size=100)
    seen: list[int] = []
    with ParquetStorage(tmp_path / "big.parquet", cache_bytes=6 * 100 * 1000) as storage:
        loader = Loader(
            storage, batch_size=25, sampling=Sampling(shuffle="block", seed=3), reads=Reads(fetch_concurrency=2)
        )  # shuffle_window=32
        assert loader.sampler.window < 32
        for batch in loader:
            seen.extend(storage.index_of(key) for key in batch.keys)
        assert sorted(seen) == list(range(2000)), "every row once"
        assert storage.stats()["row_groups_read"] == 20, "each row group read once, not once per sample"
    assert f"mixes {loader.sampler.window} blocks, not shuffle_window=32" in caplog.text


def test_convert_from_parquet_to_shards_and_the_cli_to_parquet(tmp_path: Path) -> None:
    samples = make_folder(tmp_path / "folder", classes=2, per_class=6)
    command = [
        sys.executable,
        "-m",
        "stoker.cli",
        "convert",
        str(tmp_path / "folder"),
        str(tmp_path / "set.parquet"),
        "--quiet",
        "--no-decode-check",
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert "wrote 12 samples" in finished.stdout and "verified" in finished.stdout
    with open_storage(tmp_path / "set.parquet") as source:
        convert_storage(source, tmp_path / "shards", to="shards", progress=False, decode_check=False)
    with TarShardStorage(tmp_path / "shards") as shards:
        assert len(shards) == 12
        assert sorted(shards.read_many(shards.keys)) == sorted(data for data, _ in samples.values())


def test_other_columns_of_a_row_group_are_read_once_for_all_its_rows(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 400
    table = pa.table(
        {"image": [bytes([index % 251]) * 50 for index in range(rows)], "caption": [f"caption {index}" for index in range(rows)]}
    )
    pq.write_table(table, tmp_path / "captioned.parquet", row_group_size=100)
    with ParquetStorage(tmp_path / "captioned.parquet", image_column="image", label_column="") as storage:
        order = [index for start in range(0, rows, 25) for index in range(start, start + 25)]  # batches of 25, group by group
        captions = [storage.try_read_members(order[start : start + 25], ["caption"]) for start in range(0, rows, 25)]
        assert [member["caption"] for batch in captions for member in batch] == [f"caption {index}" for index in order]  # type: ignore[index]
        assert storage.stats()["member_row_groups_read"] == 4, "each of the 4 row groups' caption column read once"
