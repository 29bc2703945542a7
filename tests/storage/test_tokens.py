"""Token storage: flat .bin/.npy files with offsets, and token shards; their bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stoker.ingest import write_token_shards
from stoker.ops import SequencePacker
from stoker.storage import StorageError, TokenFile, open_tokens


def _documents() -> list[np.ndarray]:
    generator = np.random.default_rng(0)
    return [generator.integers(0, 60000, size=int(length)).astype(np.uint16) for length in generator.integers(0, 300, size=120)]


def _write_flat(folder: Path, documents: list[np.ndarray], suffix: str) -> Path:
    flat = np.concatenate(documents)
    offsets = np.concatenate([[0], np.cumsum([len(document) for document in documents])]).astype(np.int64)
    path = folder / f"tokens{suffix}"
    if suffix == ".npy":
        np.save(path, flat.astype(np.uint32))
    else:
        flat.tofile(path)
    np.save(folder / f"tokens{suffix}.offsets.npy", offsets)
    return path


@pytest.mark.parametrize("suffix", [".bin", ".npy"])
def test_flat_files_read_every_document(tmp_path: Path, suffix: str) -> None:
    documents = _documents()
    source = open_tokens(_write_flat(tmp_path, documents, suffix))
    assert len(source) == len(documents)
    order = list(reversed(range(len(documents))))
    assert all(np.array_equal(got, documents[index]) for got, index in zip(source.documents(order), order))
    tokens, lengths = source.chunk(10, 25)
    assert lengths.tolist() == [len(document) for document in documents[10:35]]
    assert np.array_equal(tokens, np.concatenate(documents[10:35]))


def test_token_shards_round_trip_and_packing(tmp_path: Path) -> None:
    documents = _documents()
    assert write_token_shards(documents, tmp_path / "shards", dtype="uint16", shard_size=20_000) == len(documents)
    source = open_tokens(tmp_path / "shards")
    assert len(source.storage.shards) > 1
    assert all(np.array_equal(source.document(index), document) for index, document in enumerate(documents))
    packer = SequencePacker(512, 8)
    tokens, lengths = source.chunk(0, len(source))
    packer.add_many(tokens, lengths)
    batches = list(packer.batches(final=True))
    assert sum(batch.real_tokens for batch in batches) == sum(len(document) for document in documents)


def test_bad_token_files_are_named(tmp_path: Path) -> None:
    documents = _documents()[:5]
    path = _write_flat(tmp_path, documents, ".bin")
    offsets_path = tmp_path / "tokens.bin.offsets.npy"
    offsets = np.load(offsets_path)
    offsets[3] = offsets[2] - 5  # document 2 gets a negative length
    np.save(offsets_path, offsets)
    with pytest.raises(StorageError, match="document 2 has a negative length"):
        TokenFile(path)
    offsets[3] = offsets[-1] + 10_000
    np.save(offsets_path, np.sort(offsets))
    with pytest.raises(StorageError, match="documents end at token"):
        TokenFile(path)
    with pytest.raises(FileNotFoundError, match="offsets"):
        TokenFile(tmp_path / "tokens.bin", offsets=tmp_path / "missing.offsets.npy")
    np.save(tmp_path / "grid.npy", np.zeros((2, 2), np.uint16))
    np.save(tmp_path / "grid.npy.offsets.npy", np.array([0]))
    with pytest.raises(StorageError, match="1-D"):
        TokenFile(tmp_path / "grid.npy")


def test_token_ids_must_fit_the_shard_dtype(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="document 1: token ids must be integers in 0..65535"):
        write_token_shards([np.arange(3), np.array([70000])], tmp_path / "out", dtype="uint16")


def test_a_token_file_converts_to_shards_as_readme_says(tmp_path: Path) -> None:
    documents = [np.arange(length, dtype=np.uint16) + length for length in (3, 0, 2000, 7)]
    np.concatenate(documents).tofile(tmp_path / "train.bin")
    np.save(tmp_path / "train.bin.offsets.npy", np.cumsum([0] + [len(document) for document in documents]).astype(np.int64))
    flat = open_tokens(tmp_path / "train.bin")
    assert [document.tolist() for document in flat] == [document.tolist() for document in documents]
    assert write_token_shards(flat, tmp_path / "shards") == 4
    assert [document.tolist() for document in open_tokens(tmp_path / "shards")] == [document.tolist() for document in documents]
