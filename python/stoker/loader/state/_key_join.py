"""Matching a saved dataset's keys with the storage's, by 128-bit hash, for a resume after the
dataset changed: about 32 bytes a storage key at the peak, where a hash table of the key strings
(the pyarrow join this replaced) took about 140 (14 GB at 10^8 keys).

Each key is hashed natively (`stoker._native.key_hashes`, two SipHash values) a million at a
time, from Arrow string arrays; the storage's hashes are sorted once, and the saved keys are
hashed and looked up by binary search a chunk at a time, as they are read from the key list. Two different keys agree on both halves with probability about 2^-128. Where
two of the storage's keys agree on the first half (a repeated key, or a 2^-64 coincidence), the
match falls back to the exact join over the strings, so the result is always that of comparing
the keys themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..._native import key_hashes
from ._key_list import key_chunks_of

__all__ = ["KeyHashes", "RepeatedKeyError", "SortedKeyHashes", "match_keys"]


class KeyHashes:
    """Every key's hash, in storage order: ``first`` and ``second`` (uint64 arrays)."""

    def __init__(self, first: np.ndarray, second: np.ndarray) -> None:
        self.first, self.second = first, second

    def __len__(self) -> int:
        return len(self.first)

    @classmethod
    def of_chunks(cls, chunks: Iterable[Any], count: int) -> KeyHashes:
        """The hashes of ``count`` keys given as pyarrow large string arrays, in order.

        Raises:
            ValueError: The chunks hold another number of keys than ``count``.
        """
        first, second = np.empty(count, np.uint64), np.empty(count, np.uint64)
        done = 0
        for chunk in chunks:
            if done + len(chunk) > count:
                raise ValueError(f"more than the {count} keys expected")
            first[done : done + len(chunk)], second[done : done + len(chunk)] = _hash_array(chunk)
            done += len(chunk)
        if done != count:
            raise ValueError(f"{done} keys where {count} were expected")
        return cls(first, second)

    @classmethod
    def of_sequence(cls, keys: Sequence[str]) -> KeyHashes:
        """The hashes of a storage's ``keys``, converted a million at a time."""
        return cls.of_chunks(key_chunks_of(keys), len(keys))


def _hash_array(array: Any) -> tuple[np.ndarray, np.ndarray]:
    """The two hash halves of each key of one pyarrow large string array (a slice or not)."""
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return key_hashes(np.ascontiguousarray(offsets), data)


class SortedKeyHashes:
    """A storage's key hashes sorted by their first half, to look keys up in: 24 bytes a key
    (the halves in sorted order and each one's storage index).

    Args:
        hashes: Every key's hash, in storage order (its arrays are let go of as they are sorted).

    Raises:
        RepeatedKeyError: Two keys share a first half (a repeated key, or a 2^-64 coincidence).
    """

    def __init__(self, hashes: KeyHashes) -> None:
        self.order = np.argsort(hashes.first)  # first halves found unique below: no tie to keep in order
        self.first = hashes.first[self.order]
        hashes.first = self.first  # the unsorted half is garbage from here on
        self.second = hashes.second[self.order]
        hashes.second = self.second
        if len(self.first) > 1 and bool((self.first[1:] == self.first[:-1]).any()):
            raise RepeatedKeyError("two of the storage's keys share a hash")

    def indices_of(self, hashes: KeyHashes) -> np.ndarray:
        """Each of ``hashes``' keys' storage index (-1: not there), as int64."""
        if not len(self.first):
            return np.full(len(hashes), -1, dtype=np.int64)
        places = np.minimum(np.searchsorted(self.first, hashes.first), len(self.first) - 1)
        hit = (self.first[places] == hashes.first) & (self.second[places] == hashes.second)
        return np.where(hit, self.order[places], -1)


class RepeatedKeyError(ValueError):
    """A storage's keys do not hash apart: only comparing the strings can match them."""


def match_keys(before: Iterable[Any], count: int, now: KeyHashes) -> np.ndarray:
    """Each of the ``count`` saved keys' index among the storage's (-1: not there), as int64; the
    saved keys given as pyarrow large string arrays in order, hashed and looked up a chunk at a
    time, so that only the storage's hashes are held whole.

    Raises:
        RepeatedKeyError: Two of the storage's keys share a first hash half.
        ValueError: The chunks hold another number of keys than ``count``.
    """
    table = SortedKeyHashes(now)
    result = np.empty(count, dtype=np.int64)
    done = 0
    for chunk in before:
        if done + len(chunk) > count:
            raise ValueError(f"more than the {count} keys expected")
        result[done : done + len(chunk)] = table.indices_of(KeyHashes.of_chunks([chunk], len(chunk)))
        done += len(chunk)
    if done != count:
        raise ValueError(f"{done} keys where {count} were expected")
    return result
