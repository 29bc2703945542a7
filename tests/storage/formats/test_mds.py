"""MosaicML Streaming's MDS shards read in place, against MosaicML's own reader: every sample's
payload byte for byte and its label, raw and compressed shards, through the Loader with its
guarantees (every sample once, exact resume, equal steps per rank, names in errors)."""

from __future__ import annotations

import io
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stoker import Loader
from stoker.cli import main
from stoker.errors import ConfigurationError
from stoker.loader import Batch, Sampling
from stoker.storage import Storage, open_storage, storage_format
from stoker.storage.formats import PeerFormatStorage
from stoker_testbed.data.datasets import resumed_epoch
from stoker_testbed.data.peer_formats import jpeg_samples, random_samples, write_mds

streaming = pytest.importorskip("streaming", reason="the differential tests need MosaicML Streaming: pip install mosaicml-streaming")


@pytest.mark.parametrize("compression", [None, "zstd", "gz"])
def test_every_sample_matches_mosaicmls_own_reader_byte_for_byte(tmp_path: Path, compression: str | None) -> None:
    samples = random_samples(700, seed=3)
    folder = write_mds(tmp_path / "mds", samples, compression=compression, size_limit=200_000)
    # MosaicML's reader of a dataset elsewhere: it copies each shard to its local folder and inflates it.
    reference = streaming.StreamingDataset(remote=str(folder), local=str(tmp_path / "local"), shuffle=False, batch_size=1)
    with open_storage(folder) as storage:
        assert isinstance(storage, PeerFormatStorage) and storage_format(folder) == "mds"
        assert len(storage) == len(reference) == len(samples) and len(storage.block_sizes()) > 3
        assert (storage.fields.payload, storage.fields.label, storage.fields.picked) == ("image", "label", True)
        ours = storage.read_indices(range(len(storage)))
        for index in range(len(reference)):
            theirs = reference[index]
            assert ours[index] == theirs["image"], index
            assert storage.labels[index] == theirs["label"]
    # Any column the user names: text as its UTF-8 bytes, a float or a number written as text as the label.
    with PeerFormatStorage(folder, payload="caption", label="score") as captions:
        assert [bytes(data).decode() for data in captions.read_indices(range(50))] == [reference[index]["caption"] for index in range(50)]
        assert np.allclose(captions.labels[:50], [reference[index]["score"] for index in range(50)])
    with PeerFormatStorage(folder, label="rank") as ranks:
        assert list(ranks.labels[:20]) == [reference[index]["rank"] for index in range(20)]


def test_jpeg_columns_decode_to_mosaicmls_own_images(tmp_path: Path) -> None:
    folder = write_mds(tmp_path / "mds", jpeg_samples(40), payload_encoding="jpeg")
    reference = streaming.LocalDataset(local=str(folder))
    with open_storage(folder) as storage:
        assert storage.fields.payload == "image"
        for index, data in enumerate(storage.read_indices(range(len(storage)))):
            assert np.array_equal(np.asarray(Image.open(io.BytesIO(data))), np.asarray(reference[index]["image"]))


def test_a_loader_over_mds_delivers_every_sample_once_and_resumes_exactly(tmp_path: Path) -> None:
    samples = random_samples(500, seed=5)
    folder = write_mds(tmp_path / "mds", samples, compression="zstd", size_limit=150_000)
    truth = {f"{index}": payload for index, (payload, _) in enumerate(samples)}

    def check(opened: Storage, batch: Batch) -> None:
        assert list(batch.labels) == [samples[opened.index_of(key)][1] for key in batch.keys]

    delivered = resumed_epoch(
        lambda: open_storage(folder), Sampling(shuffle="block", seed=2), batch_size=32, stop_after=5, each_batch=check
    )
    assert Counter(delivered) == Counter(truth.values())


def test_ranks_take_equal_steps_and_together_every_sample(tmp_path: Path) -> None:
    samples = random_samples(301, seed=6)
    folder = write_mds(tmp_path / "mds", samples, size_limit=100_000)
    seen: Counter[bytes] = Counter()
    steps = []
    for rank in range(2):
        with open_storage(folder) as storage:
            loader = Loader(storage, batch_size=16, decode=bytes, sampling=Sampling(seed=1, rank=rank, world_size=2))
            batches = list(loader)
            steps.append(len(batches))
            for batch in batches:
                seen.update(data for data, padded in zip(batch.data, batch.padding) if not padded)
            loader.close()
    assert steps[0] == steps[1]
    assert seen == Counter(payload for payload, _ in samples)


def test_the_second_open_reads_the_saved_table_and_a_rewritten_shard_gets_a_new_one(tmp_path: Path) -> None:
    folder = write_mds(tmp_path / "mds", random_samples(200, seed=7), size_limit=50_000)
    with PeerFormatStorage(folder) as first:
        assert not isinstance(first.labels, np.memmap)  # built now
    with PeerFormatStorage(folder) as second:
        assert isinstance(second.labels, np.memmap) and second.content_digest() == first.content_digest()
    shutil.rmtree(folder)
    write_mds(folder, random_samples(200, seed=8), size_limit=50_000)  # the same names, new samples
    with PeerFormatStorage(folder) as third:
        assert third.content_digest() != first.content_digest()
        assert third.read_indices([0])[0] == random_samples(200, seed=8)[0][0]


def test_a_field_that_is_not_there_or_cannot_serve_is_refused_with_the_fields_listed(tmp_path: Path) -> None:
    folder = write_mds(tmp_path / "mds", random_samples(20), size_limit=50_000)
    with pytest.raises(ConfigurationError, match=r"payload='pixels'.*no such field.*'caption'"):
        PeerFormatStorage(folder, payload="pixels")
    with pytest.raises(ConfigurationError, match=r"label='caption'.*not a number"):
        PeerFormatStorage(folder, label="caption")
    with PeerFormatStorage(folder, label="") as unlabelled:
        assert unlabelled.fields.label is None and set(unlabelled.labels) == {-1}


def test_inspect_says_the_format_and_which_fields_a_read_returns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_mds(tmp_path / "mds", random_samples(30, classes=3), size_limit=30_000)
    assert main(["inspect", str(folder)]) == 0
    shown = capsys.readouterr().out
    assert f"{folder}: mds, 30 samples" in shown
    assert "MDS files; fields: payload 'image', label 'label' (picked by stoker (name others with payload= and label=))" in shown
    assert "labels: 3 distinct" in shown
