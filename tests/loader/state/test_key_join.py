"""Matching saved keys with the storage's by hash (`loader/state/_key_join.py`): the same answer
as comparing the strings, for any keys (Hypothesis), from sliced Arrow arrays, and the exact
join where the storage repeats a key. The resume it serves: tests/loader/state/test_dataset_change.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker._native import key_hashes
from stoker.errors import ProvenanceError
from stoker.loader.state import KeyList, write_key_list
from stoker.loader.state._dataset_change import DatasetChange
from stoker.loader.state._key_join import KeyHashes, RepeatedKeyError, SortedKeyHashes, match_keys
from stoker.storage import MemoryStorage

keys = st.text(max_size=12)


class RepeatingStorage(MemoryStorage):
    """A storage that lists one key twice (two shards holding a sample of the same name): a saved
    key maps to its first place, as the string join does."""

    def __init__(self, samples: dict[str, bytes], repeated: str) -> None:
        super().__init__(samples)
        self._keys = [*self._keys, repeated]
        self._labels = [*self._labels, None]


def by_strings(before: list[str], now: list[str]) -> list[int]:
    first_place: dict[str, int] = {}
    for index, key in enumerate(now):
        first_place.setdefault(key, index)
    return [first_place.get(key, -1) for key in before]


@settings(max_examples=200, deadline=None)
@given(before=st.lists(keys, max_size=60), now=st.lists(keys, max_size=60, unique=True))
def test_matching_by_hash_finds_what_comparing_the_strings_finds(before: list[str], now: list[str]) -> None:
    chunks = [pyarrow.array(before[start : start + 7], pyarrow.large_string()) for start in range(0, len(before), 7)]
    matched = match_keys(chunks, len(before), KeyHashes.of_sequence(now))
    assert matched.tolist() == by_strings(before, now)


def test_a_slice_of_an_arrow_array_hashes_as_its_keys_do_alone() -> None:
    array = pyarrow.array([f"sample-{index}" for index in range(50)], pyarrow.large_string())
    whole = KeyHashes.of_chunks([array], 50)
    pieces = KeyHashes.of_chunks([array.slice(0, 7), array.slice(7, 30), array.slice(37)], 50)
    assert np.array_equal(whole.first, pieces.first) and np.array_equal(whole.second, pieces.second)
    assert len(set(whole.first.tolist())) == 50 and not np.array_equal(whole.first, whole.second)


def test_a_repeated_key_in_the_storage_leaves_the_match_to_the_strings() -> None:
    with pytest.raises(RepeatedKeyError):
        SortedKeyHashes(KeyHashes.of_sequence(["b", "x", "b"]))


def test_offsets_outside_the_bytes_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="key offset 2 is 9"):
        key_hashes(np.array([0, 2, 9], np.int64), np.frombuffer(b"abcd", np.uint8))
    with pytest.raises(ValueError, match="key offset 1 is -3"):
        key_hashes(np.array([0, -3], np.int64), np.frombuffer(b"abcd", np.uint8))


def test_a_change_over_a_storage_that_repeats_a_key_matches_each_saved_key_with_its_first(tmp_path: Path) -> None:
    saved = ["a", "b", "c", "d"]
    write_key_list(tmp_path / "keys.parquet", saved, dataset="d1", blocks=None)
    storage = RepeatingStorage({"c": b"1", "a": b"2", "e": b"3"}, repeated="c")
    change = DatasetChange(storage, KeyList(tmp_path / "keys.parquet", dataset="d1", samples=4), "next_epoch")
    assert change.old_to_new.tolist() == [1, -1, 0, -1]


def test_a_key_list_names_keys_by_index_across_its_row_groups(tmp_path: Path) -> None:
    saved = [f"k{index}" for index in range(10)]
    path = tmp_path / "keys.parquet"
    write_key_list(path, saved, dataset="d1", blocks=None)
    listed = KeyList(path, dataset="d1", samples=10)
    assert listed.keys_at([9, 0, 4]) == ["k9", "k0", "k4"]
    assert [str(key) for chunk in listed.key_chunks() for key in chunk.to_pylist()] == saved
    with pytest.raises(ProvenanceError, match="of 10 keys"):
        KeyList(path, dataset="d1", samples=11)


def test_saved_keys_of_another_count_than_said_are_refused() -> None:
    chunk = pyarrow.array(["a", "b", "c"], pyarrow.large_string())
    with pytest.raises(ValueError, match="more than the 2 keys"):
        match_keys([chunk], 2, KeyHashes.of_sequence(["a"]))
    with pytest.raises(ValueError, match="3 keys where 4"):
        match_keys([chunk], 4, KeyHashes.of_sequence(["a"]))
