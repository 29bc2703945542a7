"""Matching a saved dataset's keys with the storage's, by 128-bit hash, for a resume after the
dataset changed: 24-32 bytes a sample at the peak, where a hash table of the key strings (the
pyarrow join this replaces) took about 140 (14 GB at 10^8 keys).

Each key is hashed natively (`stoker._native.key_hashes`, two SipHash values) a million at a
time, from Arrow string arrays; the storage's hashes are sorted once and each saved key's looked
up by binary search. Two different keys agree on both halves with probability about 2^-128. Where
two of the storage's keys agree on the first half (a repeated key, or a 2^-64 coincidence), the
match falls back to the exact join over the strings, so the result is always that of comparing
the keys themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..._native import key_hashes

__all__ = ["KeyHashes", "match_keys"]

_CHUNK = 1 << 20  # keys hashed, or looked up, at once


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
        import pyarrow

        chunks = (pyarrow.array(list(keys[start : start + _CHUNK]), pyarrow.large_string()) for start in range(0, len(keys), _CHUNK))
        return cls.of_chunks(chunks, len(keys))


def _hash_array(array: Any) -> tuple[np.ndarray, np.ndarray]:
    """The two hash halves of each key of one pyarrow large string array (a slice or not)."""
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return key_hashes(np.ascontiguousarray(offsets), data)


def match_keys(before: KeyHashes, now: KeyHashes) -> np.ndarray | None:
    """Each saved key's index among the storage's (-1: not there), as int64; None where two of
    the storage's keys share a first hash half, and only the exact join can tell."""
    order = np.argsort(now.first, kind="stable")
    sorted_first = now.first[order]
    if len(sorted_first) > 1 and bool((sorted_first[1:] == sorted_first[:-1]).any()):
        return None
    result = np.full(len(before), -1, dtype=np.int64)
    if not len(sorted_first):
        return result
    for start in range(0, len(before), _CHUNK):
        first = before.first[start : start + _CHUNK]
        places = np.minimum(np.searchsorted(sorted_first, first), len(sorted_first) - 1)
        candidates = order[places]
        hit = (sorted_first[places] == first) & (now.second[candidates] == before.second[start : start + _CHUNK])
        result[start : start + len(first)] = np.where(hit, candidates, -1)
    return result
