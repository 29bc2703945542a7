"""Lance datasets read in place through Lance's own reader, against Lance's own ``take``: a
plain binary column and a blob column, labels from their column, through the Loader."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stoker.errors import StorageError
from stoker.loader import Sampling
from stoker.storage import LanceStorage, open_storage, storage_format
from stoker_testbed.data.datasets import resumed_epoch
from stoker_testbed.data.peer_formats import random_samples, write_lance

lance = pytest.importorskip("lance", reason="the differential tests need Lance: pip install pylance")


@pytest.mark.parametrize("blob", [False, True], ids=["binary", "blob"])
def test_every_row_matches_lances_own_take_byte_for_byte(tmp_path: Path, blob: bool) -> None:
    samples = random_samples(350, seed=20)
    uri = write_lance(tmp_path / "train.lance", samples, blob=blob)
    assert storage_format(uri) == "lance"
    with open_storage(uri) as storage:
        assert isinstance(storage, LanceStorage) and len(storage) == 350
        assert (storage.fields.payload, storage.fields.label) == ("image", "label")
        theirs = lance.dataset(str(uri))
        rows = [57, 3, 349, 3, 120]
        expected = (
            [bytes(blob_file.read()) for blob_file in theirs.take_blobs("image", indices=rows)]
            if blob
            else theirs.take(rows, columns=["image"]).column(0).to_pylist()
        )
        assert storage.read_indices(rows) == expected
        assert storage.read_indices(range(350)) == [payload for payload, _ in samples]
        assert list(storage.labels) == theirs.to_table(columns=["label"]).column(0).to_pylist()


def test_a_loader_over_lance_delivers_every_row_once_and_resumes_exactly(tmp_path: Path) -> None:
    samples = random_samples(260, seed=21)
    uri = write_lance(tmp_path / "train.lance", samples)
    delivered = resumed_epoch(lambda: open_storage(uri), Sampling(seed=6), batch_size=20, stop_after=5)
    assert Counter(delivered) == Counter(payload for payload, _ in samples)


def test_a_folder_that_is_not_lance_is_named(tmp_path: Path) -> None:
    (tmp_path / "broken.lance").mkdir()
    with pytest.raises(StorageError, match=r"broken\.lance: not a Lance dataset"):
        open_storage(tmp_path / "broken.lance")
