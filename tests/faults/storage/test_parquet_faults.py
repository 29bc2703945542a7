"""Bad Parquet input: each a clear error naming the file (and row), or a counted failure of the
samples it touches, with nothing else lost."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from stoker.loader import FailurePolicy, Loader, Sampling
from stoker.storage import ParquetStorage, StorageError

pa = pytest.importorskip("pyarrow")
parquet = pytest.importorskip("pyarrow.parquet")


def write(
    path: Path, payloads: list[bytes | None], *, row_group_size: int = 10, labels: list | None = None, checksums: bool = True
) -> None:
    columns = {"image": pa.array(payloads, pa.binary()), "label": pa.array(labels if labels is not None else [0] * len(payloads))}
    parquet.write_table(pa.table(columns), path, row_group_size=row_group_size, compression="none", write_page_checksum=checksums)


def payloads(count: int) -> list[bytes | None]:
    return [f"sample-{index:04d}-".encode() * 40 for index in range(count)]


def test_a_corrupt_footer_names_the_file(tmp_path: Path) -> None:
    write(tmp_path / "good.parquet", payloads(20))
    data = bytearray((tmp_path / "good.parquet").read_bytes())
    data[-12:-8] = b"\xff\xff\xff\x7f"  # the footer's length points before the file
    (tmp_path / "bad.parquet").write_bytes(bytes(data))
    with pytest.raises(StorageError, match="bad.parquet: not a readable Parquet file"):
        ParquetStorage(tmp_path)


def test_a_file_cut_short_names_the_file(tmp_path: Path) -> None:
    write(tmp_path / "cut.parquet", payloads(20))
    data = (tmp_path / "cut.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(StorageError, match="cut.parquet: not a readable Parquet file"):
        ParquetStorage(tmp_path / "cut.parquet")


def test_missing_and_mistyped_columns_are_named_with_the_columns_there(tmp_path: Path) -> None:
    write(tmp_path / "a.parquet", payloads(5))
    with pytest.raises(StorageError, match=r"no image column 'jpg' \(its columns: image, label\)"):
        ParquetStorage(tmp_path / "a.parquet", image_column="jpg")
    with pytest.raises(StorageError, match="column 'label' is int64, not bytes"):
        ParquetStorage(tmp_path / "a.parquet", image_column="label")
    with pytest.raises(StorageError, match="no label column 'target'"):
        ParquetStorage(tmp_path / "a.parquet", label_column="target")
    parquet.write_table(pa.table({"image": payloads(2), "label": pa.array([[1], [2]])}), tmp_path / "b.parquet")
    with pytest.raises(StorageError, match="label column 'label' is list<"):
        ParquetStorage(tmp_path / "b.parquet")
    parquet.write_table(pa.table({"a": payloads(2), "b": payloads(2)}), tmp_path / "c.parquet")
    with pytest.raises(StorageError, match="several columns of bytes"):
        ParquetStorage(tmp_path / "c.parquet")


def test_files_that_disagree_on_columns_are_refused(tmp_path: Path) -> None:
    write(tmp_path / "a.parquet", payloads(5))
    parquet.write_table(pa.table({"image": payloads(5), "cls": pa.array([1] * 5)}), tmp_path / "b.parquet")
    with pytest.raises(StorageError, match="b.parquet: its columns .* differ from"):
        ParquetStorage(tmp_path)


def test_an_empty_row_group_loses_nothing_around_it(tmp_path: Path) -> None:
    schema = pa.schema([("image", pa.binary()), ("label", pa.int64())])
    first, second = payloads(15)[:7], payloads(15)[7:]
    with parquet.ParquetWriter(tmp_path / "e.parquet", schema) as writer:
        writer.write_table(pa.table({"image": first, "label": [0] * 7}, schema=schema))
        writer.write_table(pa.table({"image": pa.array([], pa.binary()), "label": pa.array([], pa.int64())}, schema=schema))
        writer.write_table(pa.table({"image": second, "label": [1] * 8}, schema=schema))
    with ParquetStorage(tmp_path / "e.parquet") as storage:
        assert len(storage) == 15
        assert storage.block_sizes() in ([7, 8], [15]), "no empty block"
        assert storage.read_indices(list(range(15))) == first + second
        delivered = [key for batch in Loader(storage, batch_size=4, sampling=Sampling(shuffle="block")) for key in batch.keys]
        assert sorted(delivered) == sorted(storage.keys)


def test_a_null_payload_is_a_failure_naming_file_and_row(tmp_path: Path) -> None:
    values = payloads(12)
    values[7] = None
    write(tmp_path / "n.parquet", values)
    with ParquetStorage(tmp_path / "n.parquet") as storage:
        results = storage.try_read_indices(list(range(12)))
        assert isinstance(results[7], StorageError)
        assert "n.parquet row 7" in str(results[7]) and "null" in str(results[7])
        assert [result for index, result in enumerate(results) if index != 7] == [v for index, v in enumerate(values) if index != 7]


def test_a_corrupt_page_fails_its_row_group_by_name_and_nothing_else(tmp_path: Path) -> None:
    values = payloads(40)
    write(tmp_path / "p.parquet", values, row_group_size=10)
    data = bytearray((tmp_path / "p.parquet").read_bytes())
    where = data.find(b"sample-0013-")  # inside row group 1's payload page
    data[where + 5] ^= 0xFF
    (tmp_path / "p.parquet").write_bytes(bytes(data))
    with ParquetStorage(tmp_path / "p.parquet") as storage:
        loader = Loader(
            storage, batch_size=8, failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None), sampling=Sampling(seed=0)
        )
        delivered = [data for batch in loader for data in batch.data]
        failed = sorted(failure.sample for failure in loader.failures)
    assert failed == sorted(f"p.parquet#{row}" for row in range(10, 20)), "exactly the row group with the bad page"
    assert all("row group 1" in failure.error and "p.parquet row 1" in failure.error for failure in loader.failures)
    good = [value for row, value in enumerate(values) if not 10 <= row < 20]
    assert sorted(set(delivered)) == sorted(good), "every other sample delivered, none altered"


def test_files_whose_labels_are_of_another_kind_are_refused_by_name(tmp_path: Path) -> None:
    write(tmp_path / "a.parquet", payloads(5), labels=[0, 1, 2, 0, 1])
    write(tmp_path / "b.parquet", payloads(5), labels=["cat", "dog", "cat", "dog", "cat"])
    with pytest.raises(StorageError, match="b.parquet: label column 'label' holds class names, and .*a.parquet's holds integers"):
        ParquetStorage(tmp_path)
    (tmp_path / "b.parquet").unlink()
    write(tmp_path / "c.parquet", payloads(5), labels=[0.5, 1.0, 2.0, 0.0, 1.0])
    with pytest.raises(StorageError, match="c.parquet: label column 'label' holds floats, and .*a.parquet's holds integers"):
        ParquetStorage(tmp_path)


def test_unread_columns_and_missing_checksums_are_said_once_per_dataset_at_info(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    table = pa.table({"image": payloads(4), "label": pa.array([0, 1, 0, 1]), "caption": pa.array(["a", "b", "c", "d"])})
    parquet.write_table(table, tmp_path / "plain.parquet")
    caplog.set_level(logging.INFO, logger="stoker.storage")
    storage = ParquetStorage(tmp_path / "plain.parquet")
    said = [record for record in caplog.records if record.name == "stoker.storage"]
    assert {record.levelno for record in said} == {logging.INFO}, "how the files were written is a note, not a warning"
    text = caplog.text
    assert "not read: caption" in text
    assert "carry no checksums" in text and "write_page_checksum=True" in text
    assert len(storage.notes) == 2 and "not read: caption" in storage.notes[0]
    caplog.clear()
    again = ParquetStorage(tmp_path / "plain.parquet")
    assert caplog.text == "", "a second open of the same dataset says nothing again"
    assert again.notes == storage.notes, "the notes stay on the storage (stoker inspect shows them)"
    parquet.write_table(table.drop(["caption"]), tmp_path / "checked.parquet", write_page_checksum=True)
    checked = ParquetStorage(tmp_path / "checked.parquet")
    assert caplog.text == "" and checked.notes == []
