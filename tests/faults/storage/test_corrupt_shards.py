"""Damaged tar shards: flipped bits, a shard swapped for another of the same size and headers, a
shard truncated under a running reader. Each is caught and named, and only the damaged samples
fail."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from stoker import Loader
from stoker.ingest import convert_storage
from stoker.loader import FailurePolicy
from stoker.ops import ImageTransform
from stoker.storage import CorruptSampleError, FileStorage, ShardError, TarShardStorage
from stoker.storage.local import index_path, load_index

from ..conftest import make_images


@pytest.fixture
def shards(tmp_path: Path) -> Path:
    make_images(tmp_path / "images", count=40)
    with FileStorage(tmp_path / "images") as source:
        convert_storage(source, tmp_path / "shards", shard_size=64 * 1024, progress=False)
    return tmp_path / "shards"


def payload_span(storage: TarShardStorage, key: str) -> tuple[Path, int, int]:
    index = storage.index_of(key)
    _, (offset, size) = storage.catalog.span(index, storage.payload)
    return Path(storage.shards[storage.catalog.locate(index)[0]].shard), offset, size


def test_flipped_bytes_inside_an_image_are_caught(shards: Path) -> None:
    storage = TarShardStorage(shards)
    victim = storage.keys[5]
    path, offset, size = payload_span(storage, victim)
    with open(path, "r+b") as file:  # 64 bytes in the middle of the entropy-coded data
        file.seek(offset + size // 2)
        data = file.read(64)
        file.seek(offset + size // 2)
        file.write(bytes(byte ^ 0x5A for byte in data))
    with pytest.raises(CorruptSampleError, match=f"{victim}.*CRC-32 mismatch"):
        storage.read(victim)
    results = storage.try_read_indices(range(len(storage)))
    assert [storage.keys[index] for index, result in enumerate(results) if isinstance(result, Exception)] == [victim]
    loader = Loader(
        TarShardStorage(shards), batch_size=8, transform=ImageTransform(resize=(16, 16)), failure_policy=FailurePolicy(on_error="zero")
    )
    invalid = [key for batch in loader for key, valid in zip(batch.keys, batch.valid.tolist()) if not valid]
    assert invalid == [victim]
    [failure] = loader.failures
    assert failure.stage == "fetch" and "CRC-32 mismatch" in failure.error


def test_a_shard_replaced_by_another_of_the_same_size_is_caught(tmp_path: Path, shards: Path) -> None:
    # Same keys, same member sizes, same tar headers, other bytes: another dataset's shard.
    storage = TarShardStorage(shards)
    first = load_index(Path(storage.shards[0].shard))
    forged = tmp_path / "forged.tar"
    shutil.copy(first.shard, forged)
    with open(forged, "r+b") as file:
        for position in range(len(first)):
            offset, size = first.members(position)[storage.payload]
            file.seek(offset + 2)
            file.write(os.urandom(size - 4))
    assert forged.stat().st_size == Path(first.shard).stat().st_size
    shutil.copy(forged, first.shard)
    reopened = TarShardStorage(shards)  # the index still matches the size and the headers
    results = reopened.try_read_indices(range(len(first)))
    assert all(isinstance(result, CorruptSampleError) for result in results)
    # verify=False is the explicit opt-out: the forged bytes come back as they are.
    assert TarShardStorage(shards, verify=False).read(first.key(0)) != storage.read(storage.keys[len(first)])


def test_a_failed_merged_read_fails_only_the_unreadable_samples(shards: Path) -> None:
    storage = TarShardStorage(shards)
    keys = load_index(Path(storage.shards[0].shard)).keys()
    last_path, last_offset, _ = payload_span(storage, keys[-1])
    os.truncate(last_path, last_offset + 10)  # the shard loses its last sample under the reader
    results = storage.try_read_indices([storage.index_of(key) for key in keys])
    failed = [key for key, result in zip(keys, results) if isinstance(result, Exception)]
    assert failed == [keys[-1]]
    assert str(results[-1]).count(keys[-1]) >= 1


def test_block_streaming_fails_only_flipped_and_cut_off_samples(shards: Path) -> None:
    storage = TarShardStorage(shards, block_bytes=1 << 30)  # each shard one block: a cut fails the whole read
    storage.stream_blocks()
    truth = storage.try_read_indices(range(len(storage)))  # read before the damage (blocks leave once served)
    victim = storage.keys[5]
    path, offset, size = payload_span(storage, victim)
    with open(path, "r+b") as file:
        file.seek(offset + size // 2)
        data = file.read(64)
        file.seek(offset + size // 2)
        file.write(bytes(byte ^ 0x5A for byte in data))
    cut_key = storage.keys[-1]
    cut_path, cut_offset, _ = payload_span(storage, cut_key)
    os.truncate(cut_path, cut_offset + 10)
    results = storage.try_read_indices(range(len(storage)))
    failed = {storage.keys[index]: result for index, result in enumerate(results) if isinstance(result, Exception)}
    assert set(failed) == {victim, cut_key}, "the rest of both blocks is read and delivered"
    assert "CRC-32 mismatch" in str(failed[victim]) and cut_key in str(failed[cut_key])
    assert [result for result in results if not isinstance(result, Exception)] == [
        good for good, result in zip(truth, results) if not isinstance(result, Exception)
    ]


def test_a_damaged_index_file_is_refused_by_name_and_allocates_nothing_it_declares(shards: Path) -> None:
    # An index file is input: its header is bounded before it is read, its arrays must fill the
    # file exactly and match the header's digest, and only then is any offset read through.
    shard = sorted(shards.glob("*.tar"))[0]
    index = index_path(shard)
    good = index.read_bytes()
    length = int.from_bytes(good[8:16], "little")
    arrays = (16 + length + 7) // 8 * 8

    def opened_and_read(data: bytes) -> None:
        index.write_bytes(data)
        storage = TarShardStorage(shards)
        storage.try_read_indices([0])

    cases = {
        "a header of 2**62 bytes": (
            good[:8] + (1 << 62).to_bytes(8, "little") + good[16:],
            "its header declares 4611686018427387904 bytes",
        ),
        "arrays cut short": (good[:-16], "its arrays need"),
        "a flipped offset": (
            good[: arrays + 8] + bytes(byte ^ 0xFF for byte in good[arrays + 8 : arrays + 16]) + good[arrays + 16 :],
            None,
        ),
        "not an index": (b"\x89STKIDX\n" + bytes(8), "its header declares 0 bytes"),
    }
    for name, (data, message) in cases.items():
        with pytest.raises(ShardError) as raised:
            opened_and_read(data)
        assert str(index) in str(raised.value), f"{name}: {raised.value}"
        if message:
            assert message in str(raised.value), f"{name}: {raised.value}"
    index.write_bytes(good)
    assert len(TarShardStorage(shards).read_many(TarShardStorage(shards).keys[:3])) == 3
