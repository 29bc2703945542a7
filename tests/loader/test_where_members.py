"""`Sampling(where=...)` over the metadata that peers' datasets keep inside their samples: the
fields of WebDataset ``json`` members (nested ones as ``meta.language``) and MDS columns. The
filter keeps exactly what the same condition picks row by row, equal steps on every rank; the
columns are read once and then come from the cache folder (a second Loader reads no member);
a field no sample has, or a member that cannot be read, is a named error when the Loader is made."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling
from stoker.storage import PeerFormatStorage, TarShardStorage

SAMPLES = 500
LANGUAGES = ["en", "de", "fr"]


def metadata(index: int) -> dict:
    """Sample ``index``'s json member: some samples lack a field, or hold null, as real crawls do."""
    generator = np.random.default_rng(index)
    document: dict = {"aesthetic": round(float(generator.uniform(0, 10)), 2), "meta": {"language": LANGUAGES[index % 3]}}
    if index % 7 == 0:
        del document["aesthetic"]
    if index % 11 == 0:
        document["meta"]["language"] = None
    if index % 13 == 0:
        document["width"] = int(generator.integers(100, 1000))
    return document


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def shards(tmp_path: Path) -> list[Path]:
    webdataset = pytest.importorskip("webdataset", reason="the shards are written by WebDataset's TarWriter")
    paths = []
    for shard in range(3):
        path = tmp_path / f"shard-{shard}.tar"
        with webdataset.TarWriter(str(path)) as writer:
            for index in range(shard, SAMPLES, 3):
                writer.write({"__key__": f"{index:05d}", "bin": index.to_bytes(4, "little"), "json": json.dumps(metadata(index)).encode()})
        paths.append(path)
    return paths


def delivered(loader: Loader) -> list[str]:
    return [key for batch in loader for key, padding in zip(batch.keys, batch.padding) if not padding]


def truth(condition: object) -> set[str]:
    return {f"{index:05d}" for index in range(SAMPLES) if condition(metadata(index))}  # type: ignore[operator]


def test_json_member_fields_filter_exactly_the_samples_the_condition_picks(shards: list[Path]) -> None:
    where = "aesthetic >= 5.5 and meta.language in ['en', 'de']"
    with TarShardStorage(shards) as storage:
        keys = delivered(Loader(storage, batch_size=16, sampling=Sampling(where=where)))
    expected = truth(lambda row: row.get("aesthetic") is not None and row["aesthetic"] >= 5.5 and row["meta"]["language"] in ("en", "de"))
    assert len(keys) == len(set(keys)) and set(keys) == expected and 0 < len(expected) < SAMPLES


def test_a_field_few_samples_have_keeps_only_those_and_every_rank_steps_alike(shards: list[Path]) -> None:
    with TarShardStorage(shards) as storage:
        ranks = [Loader(storage, batch_size=4, sampling=Sampling(where="width > 300", rank=rank, world_size=2)) for rank in range(2)]
        epochs = [[batch.keys for batch in loader] for loader in ranks]
    assert len(epochs[0]) == len(epochs[1]) > 0
    every = [key for epoch in epochs for keys in epoch for key in keys]
    assert set(every) == truth(lambda row: row.get("width", 0) > 300)


def test_json_fields_are_read_once_then_come_from_the_cache(shards: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    with TarShardStorage(shards) as storage:
        first = delivered(Loader(storage, batch_size=16, sampling=Sampling(where="meta.language == 'fr'")))

    def no_reads(self: TarShardStorage, indices: object, extensions: object) -> list:
        raise AssertionError("a member was read: the filter's column did not come from the cache")

    monkeypatch.setattr(TarShardStorage, "try_read_members", no_reads)
    with TarShardStorage(shards) as storage:
        again = delivered(Loader(storage, batch_size=16, sampling=Sampling(where="meta.language == 'fr'")))
    assert sorted(first) == sorted(again) == sorted(truth(lambda row: row["meta"]["language"] == "fr"))


def test_a_field_no_sample_has_is_named(shards: list[Path]) -> None:
    with TarShardStorage(shards) as storage, pytest.raises(ConfigurationError, match="no sample's json member has the field 'meta.height'"):
        Loader(storage, batch_size=16, sampling=Sampling(where="meta.height > 3"))


def test_a_json_member_that_does_not_parse_names_its_sample(tmp_path: Path) -> None:
    webdataset = pytest.importorskip("webdataset", reason="the shards are written by WebDataset's TarWriter")
    with webdataset.TarWriter(str(tmp_path / "a.tar")) as writer:
        for index in range(40):
            member = b"{not json" if index == 17 else json.dumps({"aesthetic": index}).encode()
            writer.write({"__key__": f"{index:05d}", "bin": b"x", "json": member})
    with TarShardStorage(tmp_path / "a.tar") as storage, pytest.raises(ConfigurationError, match=r"1 of 40 samples' json members.*'00017'"):
        Loader(storage, batch_size=8, sampling=Sampling(where="aesthetic > 3"))


@pytest.fixture
def mds(tmp_path: Path) -> Path:
    pytest.importorskip("streaming", reason="the MDS shards are written by MosaicML Streaming's MDSWriter")
    from stoker_testbed.data.peer_formats import random_samples, write_mds

    return write_mds(tmp_path / "mds", random_samples(300), size_limit=1 << 14, compression="zstd")


def test_mds_columns_filter_exactly_the_samples_the_condition_picks(mds: Path) -> None:
    # write_mds: score = index / 8 (float32), rank = -index (str_int), caption repeats "sample {index} " index % 4 times
    with PeerFormatStorage(mds) as storage:
        loader = Loader(storage, batch_size=8, sampling=Sampling(where="score >= 10 and rank > -200 and caption != ''"))
        positions = sorted(int(storage.read_values("index")[storage.index_of(key)]) for key in delivered(loader))
    assert positions == [index for index in range(300) if index / 8 >= 10 and -index > -200 and index % 4 != 0]


def test_an_mds_column_of_payloads_or_a_missing_one_is_named(mds: Path) -> None:
    with PeerFormatStorage(mds) as storage:
        with pytest.raises(ConfigurationError, match="column 'image' holds bytes"):
            Loader(storage, batch_size=8, sampling=Sampling(where="image == 'x'"))
        with pytest.raises(ConfigurationError, match="no column 'aesthetic'"):
            Loader(storage, batch_size=8, sampling=Sampling(where="aesthetic > 1"))


@pytest.mark.parametrize("damage", ["garbage", "codes out of range", "wrong length"])
def test_a_damaged_cached_column_is_worked_out_again(shards: list[Path], tmp_path: Path, damage: str) -> None:
    where = "meta.language == 'de' and aesthetic < 5"
    with TarShardStorage(shards) as storage:
        first = sorted(delivered(Loader(storage, batch_size=16, sampling=Sampling(where=where))))
    saved = sorted((tmp_path / "cache" / "columns").iterdir())
    assert saved, "the columns were kept"
    for path in saved:
        if damage == "garbage":
            path.write_bytes(b"\x93NUMPY not really")
        elif path.name.endswith(".codes.npy"):
            np.save(path, np.full(SAMPLES if damage != "wrong length" else 3, 99 if damage == "codes out of range" else 0, np.int64))
        elif path.name.endswith(".numbers.npy") and damage == "wrong length":
            np.save(path, np.zeros(3))
    with TarShardStorage(shards) as storage:
        again = sorted(delivered(Loader(storage, batch_size=16, sampling=Sampling(where=where))))
    assert first == again == sorted(truth(lambda row: row["meta"]["language"] == "de" and row.get("aesthetic", 99) < 5))
