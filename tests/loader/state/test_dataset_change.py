"""Resuming after the dataset changed, by key (`Loader.load_state_dict(keys_before=...)`): what
is found by itself, what is refused and named, and that the rest of the epoch is the same
however often it is resumed. Across kills and world sizes: tests/faults/runs/test_dataset_change_kill_resume.py."""

from __future__ import annotations

import io
import logging
import tarfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from stoker import Loader
from stoker.errors import ConfigurationError, ProvenanceError
from stoker.loader import Sampling, replay
from stoker.storage import MemoryStorage, TarShardStorage
from stoker.storage.local import build_index, write_index


class ShardedMemory(MemoryStorage):
    """Samples in blocks of 50, as shards hold them: the block shuffle reads them so."""

    def block_sizes(self) -> list[int]:
        return [min(50, len(self) - start) for start in range(0, len(self), 50)]

    def max_open_blocks(self) -> int | None:
        return None

    def stream_blocks(self) -> None:
        pass

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        pass


def store(keys: Sequence[str], kind: type[MemoryStorage] = MemoryStorage) -> MemoryStorage:
    return kind({key: key.encode() for key in keys})


OLD = [f"k{index:04d}" for index in range(400)]


def loader(keys: Sequence[str], shuffle: str = "uniform", kind: type[MemoryStorage] = MemoryStorage) -> Loader:
    return Loader(store(keys, kind), batch_size=10, sampling=Sampling(seed=7, shuffle=shuffle, in_order=True))  # type: ignore[arg-type]


def after(made: Loader, batches: int) -> tuple[list[str], dict[str, Any]]:
    keys: list[str] = []
    for number, batch in enumerate(made):
        keys += batch.keys
        if number + 1 == batches:
            return keys, made.state_dict()
    raise AssertionError("the epoch ended first")


@pytest.mark.parametrize(("shuffle", "kind"), [("uniform", MemoryStorage), ("block", ShardedMemory), ("none", MemoryStorage)])
def test_the_key_list_beside_the_ledger_is_found_and_each_sample_left_is_read_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, shuffle: str, kind: type[MemoryStorage]
) -> None:
    first = loader(OLD, shuffle, kind)
    first.record_provenance(tmp_path / "ledger")  # writes the key list there
    delivered, state = after(first, 12)
    first.close()
    gone = {delivered[3], delivered[50]} | set(sorted(set(OLD) - set(delivered))[::60])
    changed = [key for key in OLD if key not in gone] + ["late-a", "late-b"]
    resumed = loader(changed, shuffle, kind)
    resumed.record_provenance(tmp_path / "ledger")
    with caplog.at_level(logging.WARNING, logger="stoker.loader"):
        resumed.load_state_dict(state)
    assert f"2 removed after they were delivered ({delivered[3]}, {delivered[50]})" in caplog.text
    batches = [list(batch.keys) for batch in resumed]
    rest = [key for batch in batches for key in batch]
    # The ledger names the changed storage's samples: replay over it builds a continued batch again.
    assert replay(tmp_path / "ledger", 13, storage=resumed.storage).keys == batches[1]
    assert Counter(delivered + rest) == Counter(set(OLD) - (gone - {delivered[3], delivered[50]}))
    verdict = resumed.verify_epoch()
    assert verdict == {"epoch": 0, "samples": 400, "delivered": 400 - len(gone) + 2, "excluded": 0, "removed": len(gone) - 2, "added": 2}
    assert sorted(key for batch in resumed for key in batch.keys) == sorted(changed), "the next epoch is the changed dataset"
    resumed.close()


def test_the_rest_of_the_epoch_is_the_same_on_every_resume(tmp_path: Path) -> None:
    first = loader(OLD)
    first.save_keys(tmp_path)
    _, state = after(first, 7)
    changed = OLD[::2] + [f"n{index}" for index in range(30)]
    streams = []
    for _ in range(2):
        resumed = loader(changed)
        resumed.load_state_dict(state, keys_before=tmp_path, new_samples="this_epoch")
        streams.append([list(batch.keys) for batch in resumed])
    assert streams[0] == streams[1]
    assert {key for batch in streams[0][-2:] for key in batch} & {f"n{index}" for index in range(30)}, "added samples come last"

    # Resumed again within the continued epoch: it takes the same key list, and goes on.
    again = loader(changed)
    again.load_state_dict(state, keys_before=tmp_path, new_samples="this_epoch")
    _, later = after(again, 4)
    with pytest.raises(ProvenanceError, match="continues epoch 0 over a dataset that changed: pass keys_before="):
        loader(changed).load_state_dict(later)
    last = loader(changed)
    last.load_state_dict(later, keys_before=tmp_path)
    assert [list(batch.keys) for batch in last] == streams[0][4:]


def test_without_a_key_list_a_changed_size_is_refused_by_name(tmp_path: Path) -> None:
    _, state = after(loader(OLD), 5)
    with pytest.raises(
        ProvenanceError, match=r"400 samples then, 399 now\), so its positions do not carry over: resume by key with keys_before="
    ):
        loader(OLD[1:]).load_state_dict(state, allow_changes=True)
    with pytest.raises(ProvenanceError, match="no key list of dataset"):
        loader(OLD[1:]).load_state_dict(state, keys_before=tmp_path)


def test_a_key_list_of_another_dataset_or_not_one_is_refused(tmp_path: Path) -> None:
    _, state = after(loader(OLD), 5)
    other = loader(OLD[:300])
    written = Path(other.save_keys(tmp_path / "other.parquet"))
    with pytest.raises(ProvenanceError, match="lists dataset .* of 300 keys; the state was saved over dataset"):
        loader(OLD[1:]).load_state_dict(state, keys_before=written)
    (tmp_path / "junk.parquet").write_bytes(b"PAR1" + bytes(range(200)) + b"PAR1")
    with pytest.raises(ProvenanceError, match="is not a key list"):
        loader(OLD[1:]).load_state_dict(state, keys_before=tmp_path / "junk.parquet")


def test_one_rank_state_of_a_larger_world_is_refused_for_a_changed_dataset(tmp_path: Path) -> None:
    ranks = [Loader(store(OLD), batch_size=10, sampling=Sampling(seed=7, rank=rank, world_size=2)) for rank in range(2)]
    ranks[0].save_keys(tmp_path)
    _, state = after(ranks[0], 3)
    resumed = Loader(store(OLD[1:]), batch_size=10, sampling=Sampling(seed=7, rank=0, world_size=2))
    with pytest.raises(ConfigurationError, match="needs every rank's state"):
        resumed.load_state_dict(state, keys_before=tmp_path)


def write_shard(path: Path, keys: Sequence[str]) -> None:
    with tarfile.open(path, "w") as shard:
        for key in keys:
            data = key.encode()
            member = tarfile.TarInfo(f"{key}.bin")
            member.size = len(data)
            shard.addfile(member, io.BytesIO(data))


@pytest.mark.parametrize("shuffle", ["block", "uniform"])
def test_shards_taken_down_and_added_mid_epoch_resume_by_key(tmp_path: Path, shuffle: str) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    for number in range(6):
        write_shard(folder / f"shard-{number:02d}.tar", [f"s{number}-{index:03d}" for index in range(40)])

    def opened() -> Loader:
        storage = TarShardStorage(sorted(folder.glob("*.tar")), block_bytes=1 << 10)
        return Loader(storage, batch_size=8, sampling=Sampling(seed=2, shuffle=shuffle, rank=0, world_size=1))

    first = opened()
    first.record_provenance(tmp_path / "ledger")
    delivered, state = after(first, 9)
    first.close()
    before = {f"s{number}-{index:03d}" for number in range(6) for index in range(40)}
    (folder / "shard-03.tar").unlink()  # taken down
    (folder / "shard-03.tar.idx").unlink(missing_ok=True)
    write_shard(folder / "shard-06.tar", [f"s6-{index:03d}" for index in range(40)])  # a new shard
    resumed = opened()
    resumed.record_provenance(tmp_path / "ledger")
    resumed.load_state_dict(state)
    rest = [key for batch in resumed for key in batch.keys]
    gone = {key for key in before if key.startswith("s3-")}
    assert Counter(delivered + rest) == Counter((before - gone) | (set(delivered) & gone))
    verdict = resumed.verify_epoch()
    assert verdict["removed"] == len(gone - set(delivered)) and verdict["added"] == 40
    next_epoch = [key for batch in resumed for key in batch.keys]
    assert Counter(next_epoch) == Counter((before - gone) | {f"s6-{index:03d}" for index in range(40)})
    resumed.close()


def test_a_sample_rewritten_under_its_key_is_named_where_the_index_keeps_checksums(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()

    def shard(number: int, changed: str | None = None) -> None:
        path = folder / f"shard-{number:02d}.tar"
        with tarfile.open(path, "w") as written:
            for index in range(30):
                key = f"s{number}-{index:03d}"
                data = (key + ("!" if key == changed else "")).encode()
                member = tarfile.TarInfo(f"{key}.bin")
                member.size = len(data)
                written.addfile(member, io.BytesIO(data))
        write_index(build_index(path, checksums=True))  # as `stoker convert` writes shards

    for number in range(3):
        shard(number)
    first = Loader(TarShardStorage(sorted(folder.glob("*.tar"))), batch_size=6, sampling=Sampling(seed=4))
    first.save_keys(tmp_path)
    _, state = after(first, 3)
    shard(1, changed="s1-007")  # re-encoded in place: same key, other bytes
    (folder / "shard-02.tar").unlink()  # and a shard taken down, so the dataset changed size
    resumed = Loader(TarShardStorage(sorted(folder.glob("*.tar"))), batch_size=6, sampling=Sampling(seed=4))
    with caplog.at_level(logging.WARNING, logger="stoker.loader"):
        resumed.load_state_dict(state, keys_before=tmp_path)
    assert "1 changed under the same key (s1-007: read as they are now)" in caplog.text
    assert resumed.state_dict()["dataset_change"]["changed"] == 1
