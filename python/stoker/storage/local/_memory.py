"""A storage over bytes in memory: tests, and writing shards from data made in the process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._protocol import Storage

__all__ = ["MemoryStorage"]


class MemoryStorage(Storage):
    """Samples given as ``{key: bytes}`` (and optional ``{key: label}``), in insertion order."""

    def __init__(self, samples: Mapping[str, bytes], labels: Mapping[str, int | None] | None = None) -> None:
        super().__init__()
        self._samples = dict(samples)
        self._keys = list(self._samples)
        self._labels = [labels.get(key) if labels else None for key in self._keys]

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        return [self._samples[self._keys[index]] for index in indices]
