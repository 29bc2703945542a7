"""Tar shards: round trips, random access, coalescing, WebDataset both ways, every bad input."""

from __future__ import annotations

import io
import json
import random
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker import _native
from stoker.ingest import convert_storage, shard_key
from stoker.loader import Loader, Sampling
from stoker.storage import FileStorage, ShardError, StaleIndexError, TarShardStorage
from stoker.storage.local import build_index, index_path, index_to_json, load_index, write_index
from stoker_testbed.data.datasets import make_folder


@pytest.fixture
def shards(tmp_path: Path, folder) -> tuple[Path, dict[str, tuple[bytes, int]]]:
    root, samples = folder
    destination = tmp_path / "shards"
    with FileStorage(root) as source:
        report = convert_storage(source, destination, shard_size=8000, progress=False, decode_check=False)
    assert report.samples == len(samples) and report.shards > 2
    by_key = {shard_key(key)[0]: value for key, value in samples.items()}
    return destination, by_key


def test_round_trip_is_byte_identical_with_labels(shards) -> None:
    destination, samples = shards
    with TarShardStorage(destination, verify=True) as storage:
        assert sorted(storage.keys) == sorted(samples)
        assert storage.classes == ["class_0", "class_1", "class_2"]
        for key, data in storage.iter_sequential(chunk=5):
            assert data == samples[key][0]
            assert storage.label(key) == samples[key][1]


def test_random_access_returns_the_requested_keys_in_order(shards) -> None:
    destination, samples = shards
    keys = sorted(samples)
    wanted = random.Random(1).choices(keys, k=50)
    with TarShardStorage(destination) as storage:
        assert storage.read_many(wanted) == [samples[key][0] for key in wanted]
        members = storage.members(wanted[0])
        assert members["jpg"] == samples[wanted[0]][0] and int(members["cls"]) == samples[wanted[0]][1]


def test_coalesced_reads_of_overlapping_adjacent_and_unordered_ranges(tmp_path: Path) -> None:
    content = random.Random(2).randbytes(200_000)
    path = tmp_path / "blob"
    path.write_bytes(content)
    generator = random.Random(3)
    ranges = [(0, 10), (10, 10), (5, 30), (150_000, 100), (40, 0), (199_990, 10), (5, 30)]
    ranges += [(offset, generator.randint(0, 3000)) for offset in generator.sample(range(190_000), 200)]
    for max_gap, max_read in [(0, 1), (64, 4096), (1 << 20, 1 << 30)]:
        answers = _native.read_ranges(path, ranges, max_gap, max_read)
        assert answers == [content[offset : offset + length] for offset, length in ranges]
    with pytest.raises(OSError, match="file has 200000 bytes"):
        _native.read_ranges(path, [(199_999, 2)])
    with pytest.raises(FileNotFoundError, match="nope"):
        _native.read_ranges(tmp_path / "nope", [(0, 1)])


def test_webdataset_reads_our_shards(shards) -> None:
    webdataset = pytest.importorskip("webdataset")
    destination, samples = shards
    urls = sorted(str(path) for path in destination.glob("*.tar"))
    seen = {}
    for sample in webdataset.WebDataset(urls, shardshuffle=False):
        seen[sample["__key__"]] = (sample["jpg"], int(sample["cls"]))
    assert seen == samples


def test_we_read_shards_webdataset_wrote(tmp_path: Path) -> None:
    webdataset = pytest.importorskip("webdataset")
    path = tmp_path / "theirs.tar"
    expected = {}
    with webdataset.TarWriter(str(path)) as writer:
        for index in range(25):
            data = random.Random(index).randbytes(100 + index)
            writer.write({"__key__": f"sample{index:04d}", "png": data, "cls": index % 4, "json": {"i": index}})
            expected[f"sample{index:04d}"] = (data, index % 4)
    # No index: built on the fly.
    with TarShardStorage(path) as storage:
        assert storage.payload == "png"
        assert {key: (data, storage.label(key)) for key, data in storage.iter_sequential()} == expected
    assert not index_path(path).exists()
    # Or written once by `stoker index`, then required.
    from stoker.cli import main

    assert main(["index", str(path)]) == 0
    with TarShardStorage(path, missing_index="error", verify=True) as storage:
        assert storage.read("sample0007") == expected["sample0007"][0]


def test_missing_index_can_be_required(tmp_path: Path) -> None:
    path = tmp_path / "plain.tar"
    with tarfile.open(path, "w") as archive:
        info = tarfile.TarInfo("a.jpg")
        info.size = 3
        archive.addfile(info, io.BytesIO(b"abc"))
    with pytest.raises(ShardError, match="stoker index"):
        TarShardStorage(path, missing_index="error")


def test_truncated_shard_is_named(shards) -> None:
    destination, _ = shards
    shard = sorted(destination.glob("*.tar"))[1]
    content = shard.read_bytes()
    shard.write_bytes(content[: len(content) // 2])
    with pytest.raises(StaleIndexError, match=shard.name):
        TarShardStorage(destination)
    index_path(shard).unlink()
    with pytest.raises(ShardError, match="truncated"):
        TarShardStorage(destination)


def test_index_that_does_not_match_its_shard(shards) -> None:
    destination, _ = shards
    first, second = sorted(destination.glob("*.tar"))[:2]
    # Same size, different content: the index of one shard beside another.
    index = load_index(first)
    index.size = second.stat().st_size
    write_index(index, index_path(second))
    with pytest.raises(StaleIndexError, match="tar header there names"):
        TarShardStorage(destination)


def test_missing_shard_is_named(shards) -> None:
    destination, _ = shards
    victim = sorted(destination.glob("*.tar"))[0]
    victim.unlink()
    with pytest.raises(FileNotFoundError, match=victim.name):
        TarShardStorage(destination)


def test_corrupt_sample_is_skipped_counted_and_reported(shards) -> None:
    destination, samples = shards
    storage = TarShardStorage(destination, verify=True)
    key = storage.keys[3]
    _, (offset, _) = storage.catalog.span(3, "jpg")
    shard = storage.shards[storage.catalog.locate(3)[0]].shard
    with open(shard, "r+b") as file:
        file.seek(offset)
        original = file.read(1)
        file.seek(offset)
        file.write(bytes([original[0] ^ 0xFF]))
    keys = list(storage.keys[:8])
    with pytest.raises(Exception, match="CRC-32 mismatch"):
        storage.read_many(keys)
    results = storage.read_many(keys, on_error="skip")
    assert results[3] is None
    assert [result for index, result in enumerate(results) if index != 3] == [samples[k][0] for index, k in enumerate(keys) if index != 3]
    assert storage.failure_count == 1 and storage.failures[0].sample == key


def test_index_format_is_versioned(shards) -> None:
    destination, _ = shards
    shard = sorted(destination.glob("*.tar"))[0]
    assert index_path(shard).read_bytes()[:8] == b"\x89STKIDX\n", "version 3: a header and arrays"
    before = TarShardStorage(destination)
    expected = (list(before.keys), list(before.labels), before.read_many(before.keys))
    # The JSON forms stoker wrote before (version 2, and version 1: no label_key) still read, the same.
    document = index_to_json(load_index(shard))
    assert document["format"] == "stoker.tar-index" and document["version"] == 2
    for old in (document, {**{key: value for key, value in document.items() if key != "label_key"}, "version": 1}):
        index_path(shard).write_text(json.dumps(old))
        after = TarShardStorage(destination)
        assert (list(after.keys), list(after.labels), after.read_many(after.keys)) == expected
    document["version"] = 99
    index_path(shard).write_text(json.dumps(document))
    with pytest.raises(ShardError, match="version 99"):
        TarShardStorage(destination)
    write_index(build_index(shard))
    assert len(TarShardStorage(destination)) > 0


def test_stoker_index_upgrade_rewrites_an_old_index_without_reading_its_shard(shards, monkeypatch: pytest.MonkeyPatch) -> None:
    from stoker.cli import main
    from stoker.storage.local.tar import _index as _tar_index

    destination, _ = shards
    shard = sorted(destination.glob("*.tar"))[0]
    before = TarShardStorage(destination)
    expected = (list(before.keys), list(before.labels), before.read_many(before.keys))
    index_path(shard).write_text(json.dumps(index_to_json(load_index(shard))))  # as an older stoker wrote it

    def no_scan(*arguments: object, **keywords: object) -> None:
        raise AssertionError("the shard was read through to be indexed again")

    monkeypatch.setattr(_tar_index.tarfile, "open", no_scan)
    assert main(["index", "--upgrade", str(shard)]) == 0
    monkeypatch.undo()
    assert index_path(shard).read_bytes()[:8] == b"\x89STKIDX\n"
    after = TarShardStorage(destination)
    assert (list(after.keys), list(after.labels), after.read_many(after.keys)) == expected, "the checksums and labels kept"
    assert after.content_digest() == before.content_digest()


def test_a_permission_error_names_the_shard(shards, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root ignores file modes, so the OS error is injected where the Rust core would raise it.
    destination, _ = shards
    storage = TarShardStorage(destination)

    def denied(path, ranges, max_gap, max_read):  # type: ignore[no-untyped-def]
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(_native, "read_ranges", denied)
    with pytest.raises(ShardError, match=r"shard-0000\d\d\.tar.*Permission denied"):
        storage.read(storage.keys[0])
    assert storage.read_many(storage.keys[:3], on_error="skip") == [None, None, None]
    assert storage.failure_count == 3


def test_block_streaming_reads_each_block_once_and_every_sample_once(tmp_path: Path) -> None:
    make_folder(tmp_path / "folder", classes=3, per_class=60)
    with FileStorage(tmp_path / "folder") as source:
        convert_storage(source, tmp_path / "shards", shard_size=200_000, progress=False, decode_check=False)
    truth = TarShardStorage(tmp_path / "shards")
    with TarShardStorage(tmp_path / "shards", block_bytes=30_000) as storage:
        blocks = storage.block_sizes()
        assert len(blocks) > len(storage.shards), "blocks are runs within shards"
        loader = Loader(storage, batch_size=16, sampling=Sampling(shuffle="block", shuffle_window=3, seed=2))
        seen: list[str] = []
        for batch in loader:
            assert batch.data == truth.read_many(batch.keys)
            seen.extend(batch.keys)
        assert sorted(seen) == sorted(storage.keys)
        assert storage.stats() == {"block_reads": len(blocks), "block_bytes_held": 0}, "each block read once, then let go"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(
        st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="./\\\x00"), min_size=1, max_size=12),
        min_size=1,
        max_size=30,
        unique=True,
    ),
    asked=st.lists(st.text(max_size=14), max_size=6),
)
def test_keys_are_found_in_shards_as_the_key_table_finds_them(tmp_path: Path, names: list[str], asked: list[str]) -> None:
    # keys of every length, prefixes of each other, any script: indices_of compares them padded, as bytes
    folder = tmp_path / f"k{abs(hash((tuple(names), tuple(asked))))}"
    folder.mkdir()
    for number, part in enumerate((names[::2], names[1::2])):
        with tarfile.open(folder / f"{number}.tar", "w", format=tarfile.PAX_FORMAT) as tar:
            for name in part:
                info = tarfile.TarInfo(f"{name}.bin")
                info.size = 1
                tar.addfile(info, io.BytesIO(b"x"))
    with TarShardStorage(sorted(folder.glob("*.tar"))) as storage:
        keys = list(storage.keys)
        wanted = [keys[position % len(keys)] for position in range(0, 3 * len(keys), 5)] + asked
        found, unknown = storage.indices_of(wanted)
        expected = [keys.index(key) for key in wanted if key in keys]
        assert found.tolist() == expected and unknown == [key for key in wanted if key not in keys]
