"""Several storages mixed with weights into one, deterministically and resumably.

An epoch of the mixture has ``num_samples`` samples; source s contributes its share of them by
weight (largest remainders, so shares add up exactly). A source with more samples than its share
contributes a different seeded subset every epoch; a source with fewer is repeated, each pass in
a new seeded order. The mixture is a fixed function of (seed, epoch), so the sampler's shuffle
over it gives the right proportions in every stretch of batches, and a resumed run sees the
same mixture.

Weights may change mid-epoch (a curriculum): `reweight` draws the samples of the indices not yet
delivered again with the new weights, leaving the delivered ones as they were. A change is a
fixed function of (seed, epoch, its number in the epoch, the delivered indices), so replaying
the epoch's changes (`changes`, which a Loader saves in its state) rebuilds the same mixture.
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
        _check_weights(weights, sources)
        self.sources = dict(sources)
        self.names = list(self.sources)
        self.weights = np.array([weights[name] for name in self.names], dtype=np.float64)
        self.num_samples = num_samples or sum(len(storage) for storage in self.sources.values())
        self.seed = seed
        self.classes = None
        self.shares = _shares(self.weights, self.num_samples)
        self.changes: list[dict[str, object]] = []  # this epoch's weight changes, oldest first
        self._first_weights = self.weights.copy()
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        """Draw the samples of epoch ``epoch`` (the Loader calls this from its own set_epoch), with
        the weights in force now."""
        self.epoch = epoch
        self.changes = []
        self._first_weights = self.weights.copy()
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

    def reweight(self, weights: Mapping[str, float], delivered: Sequence[int] | np.ndarray) -> None:
        """Give the samples not yet delivered new weights, from now on in this epoch (and in the
        next epochs). The indices in ``delivered`` keep their samples; every other index gets a
        sample drawn anew, each source's share of them by the new weights.

        Args:
            weights: ``{name: weight}`` for every source, positive.
            delivered: Storage indices already delivered in this epoch.

        Raises:
            ValueError: Missing or non-positive weights.
        """
        self.check_weights(weights)
        chosen = np.asarray(delivered, dtype=np.int64)
        if chosen.size and (chosen.min() < 0 or chosen.max() >= len(self._keys)):
            raise ValueError(f"delivered indices must be within the mixture's {len(self._keys)} samples")
        kept = np.zeros(len(self._keys), dtype=bool)
        kept[chosen] = True
        self.changes.append({"weights": {name: float(weights[name]) for name in self.names}, "delivered": np.flatnonzero(kept).tolist()})
        self.weights = np.array([weights[name] for name in self.names], dtype=np.float64)
        self.shares = _shares(self.weights, self.num_samples)
        self._redraw(np.flatnonzero(~kept), len(self.changes))

    def check_weights(self, weights: Mapping[str, float]) -> None:
        """``weights`` give every source a positive weight.

        Raises:
            ValueError: A source without a weight, a weight for no source, or one not positive.
        """
        _check_weights(weights, self.sources)

    def state(self) -> dict[str, object]:
        """The weights this epoch began with and its changes: what rebuilds its mixture."""
        return {"epoch": self.epoch, "weights": dict(zip(self.names, self._first_weights.tolist())), "changes": list(self.changes)}

    def load_state(self, state: Mapping[str, object]) -> None:
        """Rebuild the mixture of a saved `state`: its epoch drawn with its first weights, then
        its changes applied again in order."""
        first: Mapping[str, float] = state["weights"]  # type: ignore[assignment]
        self.check_weights(first)
        self.weights = np.array([first[name] for name in self.names], dtype=np.float64)
        self.shares = _shares(self.weights, self.num_samples)
        self.set_epoch(int(state["epoch"]))  # type: ignore[call-overload]
        for change in state["changes"]:  # type: ignore[attr-defined]
            self.reweight(change["weights"], change["delivered"])

    def _redraw(self, slots: np.ndarray, change: int) -> None:
        """New samples for the storage indices ``slots``, by the current weights; a source's
        samples come in a seeded order that starts with those this epoch has not used."""
        shares = _shares(self.weights, len(slots))
        used = [set(self._source_index[self._source_of == number].tolist()) for number in range(len(self.names))]
        assignment: list[tuple[int, int, int]] = []
        for number, share in enumerate(shares.tolist()):
            size = len(self.sources[self.names[number]])
            generator = np.random.default_rng([self.seed, self.epoch, number, change])
            order = generator.permutation(size)
            fresh = [index for index in order.tolist() if index not in used[number]]
            ordered = fresh + [index for index in order.tolist() if index in used[number]]
            for position in range(share):
                assignment.append((number, ordered[position % size], position // size))
        arrangement = np.random.default_rng([self.seed, self.epoch, change, len(self.names)]).permutation(len(slots))
        keys, labels = list(self._keys), list(self._labels)
        for slot, (number, index, repeat) in zip(slots[arrangement].tolist(), assignment):
            storage = self.sources[self.names[number]]
            keys[slot] = f"{self.names[number]}/{storage.keys[index]}@{change}" + (f"#{repeat + 1}" if repeat else "")
            labels[slot] = storage.labels[index]
            self._source_of[slot] = number
            self._source_index[slot] = index
        self._keys, self._labels, self._index_of = keys, labels, None

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


def _check_weights(weights: Mapping[str, float], sources: Mapping[str, Storage]) -> None:
    if set(weights) != set(sources) or any(
        isinstance(weights[name], bool) or not isinstance(weights[name], (int, float)) or not weights[name] > 0 for name in sources
    ):
        raise ValueError(f"give every source a positive weight; sources {sorted(sources)}, weights {dict(weights)}")


def _shares(weights: np.ndarray, total: int) -> np.ndarray:
    """``total`` split by ``weights``, by largest remainders (the shares add up exactly)."""
    exact = weights / weights.sum() * total
    shares = np.floor(exact).astype(np.int64)
    for index in np.argsort(-(exact - shares), kind="stable")[: total - int(shares.sum())]:
        shares[index] += 1
    return shares
