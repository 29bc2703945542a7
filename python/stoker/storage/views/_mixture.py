"""Several storages mixed with weights into one, deterministically and resumably.

An epoch of the mixture has ``num_samples`` samples; source s contributes its share of them by
weight (largest remainders, so shares add up exactly). A source with more samples than its share
contributes a different seeded subset every epoch; a source with fewer is repeated, each pass in
a new seeded order. The mixture is a fixed function of (seed, epoch), so the sampler's shuffle
over it gives the right proportions in every stretch of batches, and a resumed run sees the
same mixture.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ...errors import StorageError
from .._protocol import Storage

__all__ = ["MixedStorage"]


class MixedStorage(Storage):
    """A weighted mixture of storages.

    Args:
        sources: ``{name: storage}``; keys become ``"name/key"`` (``"name/key#2"`` for a repeat).
        weights: ``{name: weight}``, any positive numbers (normalized).
        num_samples: Samples per epoch (default: the sum of the sources' sizes).
        seed: Seeds which samples each epoch draws.

    Raises:
        ValueError: Missing or non-positive weights, or no sources.
    """

    def __init__(
        self, sources: Mapping[str, Storage], weights: Mapping[str, float], *, num_samples: int | None = None, seed: int = 0
    ) -> None:
        super().__init__()
        if not sources:
            raise ValueError("no sources to mix")
        if set(weights) != set(sources) or any(weights[name] <= 0 for name in sources):
            raise ValueError(f"give every source a positive weight; sources {sorted(sources)}, weights {dict(weights)}")
        self.sources = dict(sources)
        self.names = list(self.sources)
        self.weights = np.array([weights[name] for name in self.names], dtype=np.float64)
        self.num_samples = num_samples or sum(len(storage) for storage in self.sources.values())
        self.seed = seed
        self.classes = None
        self.shares = self._shares()
        self.set_epoch(0)

    def _shares(self) -> np.ndarray:
        exact = self.weights / self.weights.sum() * self.num_samples
        shares = np.floor(exact).astype(np.int64)
        for index in np.argsort(-(exact - shares), kind="stable")[: self.num_samples - int(shares.sum())]:
            shares[index] += 1
        return shares

    def set_epoch(self, epoch: int) -> None:
        """Draw the samples of epoch ``epoch`` (the Loader calls this from its own set_epoch)."""
        self.epoch = epoch
        source_of: list[int] = []
        index_of: list[int] = []
        keys: list[str] = []
        labels: list[int | None] = []
        for number, (name, share) in enumerate(zip(self.names, self.shares)):
            storage = self.sources[name]
            size = len(storage)
            generator = np.random.default_rng([self.seed, epoch, number])
            passes = -(-int(share) // size)
            drawn = np.concatenate([generator.permutation(size) for _ in range(passes)])[:share] if share else np.zeros(0, np.int64)
            for position, index in enumerate(drawn.tolist()):
                repeat = position // size
                keys.append(f"{name}/{storage.keys[index]}" + (f"#{repeat + 1}" if repeat else ""))
                labels.append(storage.labels[index])
                source_of.append(number)
                index_of.append(index)
        self._keys, self._labels = keys, labels
        self._source_of = np.array(source_of, dtype=np.int64)
        self._source_index = np.array(index_of, dtype=np.int64)
        self._index_of = None

    def source_counts(self, keys: Sequence[str]) -> dict[str, int]:
        """How many of ``keys`` come from each source."""
        counts = dict.fromkeys(self.names, 0)
        for key in keys:
            counts[self.names[int(self._source_of[self.index_of(key)])]] += 1
        return counts

    def describe(self) -> str:
        return "mixture of " + ", ".join(f"{name} ({weight:g})" for name, weight in zip(self.names, self.weights))

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        results: list[bytes | Exception] = [StorageError("not read")] * len(indices)
        wanted: dict[int, list[tuple[int, int]]] = {}
        for slot, position in enumerate(indices):
            source = int(self._source_of[position])
            wanted.setdefault(source, []).append((slot, int(self._source_index[position])))
        for source, requests in wanted.items():
            data = self.sources[self.names[source]].try_read_indices([index for _, index in requests])
            for (slot, _), payload in zip(requests, data):
                results[slot] = payload
        return results
