"""Hugging Face ``datasets`` folders written by ``save_to_disk``, read in place, against
``datasets``' own reader: every image's bytes and label, the ``ClassLabel``'s names as the
classes, any binary or text column as the payload, through the Loader (every sample once,
exact resume)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stoker.errors import ShardError, StorageError
from stoker.loader import Sampling
from stoker.storage import open_storage, storage_format
from stoker.storage.formats import PeerFormatStorage
from stoker_testbed.data.datasets import resumed_epoch
from stoker_testbed.data.peer_formats import jpeg_samples, random_samples, write_hf_disk

datasets = pytest.importorskip("datasets", reason="the differential tests need Hugging Face datasets: pip install datasets")


def test_every_row_matches_datasets_own_reader_byte_for_byte(tmp_path: Path) -> None:
    folder = write_hf_disk(tmp_path / "hf", jpeg_samples(90), shards=4)
    theirs = datasets.load_from_disk(str(folder)).cast_column("image", datasets.Image(decode=False))
    assert storage_format(folder) == "datasets"
    with open_storage(folder) as storage:
        assert isinstance(storage, PeerFormatStorage) and len(storage) == len(theirs) == 90
        assert (storage.fields.payload, storage.fields.label) == ("image", "label")
        assert storage.classes == theirs.features["label"].names
        for index, data in enumerate(storage.read_indices(range(len(storage)))):
            assert data == theirs[index]["image"]["bytes"], index
            assert storage.labels[index] == theirs[index]["label"]
    with PeerFormatStorage(folder, payload="caption", label="index") as captions:
        assert [data.decode() for data in captions.read_indices(range(90))] == theirs["caption"]
        assert list(captions.labels) == list(range(90)) and captions.classes is None


def test_a_loader_over_a_saved_dataset_delivers_every_sample_once_and_resumes_exactly(tmp_path: Path) -> None:
    samples = random_samples(300, seed=13)
    folder = write_hf_disk(tmp_path / "hf", samples, shards=5)
    delivered = resumed_epoch(lambda: open_storage(folder), Sampling(shuffle="block", seed=4), batch_size=24, stop_after=4)
    assert Counter(delivered) == Counter(payload for payload, _ in samples)


def test_a_dataset_dict_names_its_splits(tmp_path: Path) -> None:
    train = datasets.load_from_disk(str(write_hf_disk(tmp_path / "one", random_samples(20), shards=1)))
    datasets.DatasetDict({"train": train, "test": train}).save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(StorageError, match=r"a DatasetDict of splits \['test', 'train'\]; open one split's folder"):
        open_storage(tmp_path / "dict")
    with open_storage(tmp_path / "dict" / "train") as split:
        assert len(split) == 20


def test_compressed_arrow_buffers_are_refused_by_name(tmp_path: Path) -> None:
    import pyarrow as pa

    folder = write_hf_disk(tmp_path / "hf", random_samples(30), shards=1)
    arrow = next(folder.glob("*.arrow"))
    table = pa.ipc.open_stream(arrow.read_bytes()).read_all()
    with (
        pa.OSFile(str(arrow), "wb") as sink,
        pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer,
    ):
        writer.write_table(table)
    with pytest.raises(ShardError, match=rf"{arrow.name}: its Arrow buffers are compressed"):
        open_storage(folder)
