"""LitData's optimized chunks read in place, against LitData's own reader: both bodies a chunk
may have (items, for samples with an array; Arrow rows at the end, for bytes and numbers),
every sample's payload byte for byte and its label, through the Loader."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stoker import Loader
from stoker.errors import StorageError
from stoker.loader import Sampling
from stoker.storage import open_storage, storage_format
from stoker.storage.formats import PeerFormatStorage
from stoker_testbed.data.peer_formats import random_samples, write_litdata

litdata = pytest.importorskip("litdata", reason="the differential tests need LitData: pip install litdata")


@pytest.mark.parametrize("items", [True, False], ids=["items", "arrow rows"])
def test_every_sample_matches_litdatas_own_reader_byte_for_byte(tmp_path: Path, items: bool) -> None:
    samples = random_samples(400, seed=15)
    folder = write_litdata(tmp_path / "lit", samples, items=items)
    theirs = litdata.StreamingDataset(str(folder))
    assert storage_format(folder) == "litdata"
    with open_storage(folder) as storage:
        assert isinstance(storage, PeerFormatStorage) and len(storage) == len(theirs) == 400 and len(storage.block_sizes()) > 3
        assert (storage.fields.payload, storage.fields.label) == ("image", "label")
        ends_in_arrow_rows = (folder / storage.dataset.files[0].name).read_bytes()[-8:] == b"LDARW01\0"
        assert ends_in_arrow_rows is not items, "both of LitData's chunk bodies are tested"
        ours = storage.read_indices(range(len(storage)))
        for index in range(len(theirs)):
            row = theirs[index]
            assert ours[index] == row["image"], index
            assert storage.labels[index] == row["label"]
    with PeerFormatStorage(folder, label="index") as positions:
        assert list(positions.labels) == [theirs[index]["index"] for index in range(len(theirs))]


def test_a_loader_over_litdata_delivers_every_sample_once(tmp_path: Path) -> None:
    samples = random_samples(300, seed=16)
    with open_storage(write_litdata(tmp_path / "lit", samples)) as storage:
        loader = Loader(storage, batch_size=32, decode=bytes, sampling=Sampling(shuffle="block", seed=1))
        assert Counter(data for batch in loader for data in batch.data) == Counter(payload for payload, _ in samples)
        loader.close()


def test_encrypted_or_frame_compressed_chunks_are_refused_by_name(tmp_path: Path) -> None:
    import json

    folder = write_litdata(tmp_path / "lit", random_samples(20))
    index = json.loads((folder / "index.json").read_text())
    index["config"]["encryption"] = {"algorithm": "fernet"}
    (folder / "index.json").write_text(json.dumps(index))
    with pytest.raises(StorageError, match=r"index\.json: encrypted chunks"):
        open_storage(folder)
    index["config"].update(encryption=None, compression="zstd", compression_level="batch")
    (folder / "index.json").write_text(json.dumps(index))
    with pytest.raises(StorageError, match=r"chunks compressed per batch"):
        open_storage(folder)
