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

import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import ConfigurationError, ProvenanceError, StorageError
from .._labels import label_array
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

    Threads: the draw (``_source_of``, ``_source_index``, ``_repeat``, ``_change``) is changed by
    one thread (the Loader's: `set_epoch`, `reweight`) while readers in any thread turn positions
    into samples; both sides hold ``_draw_lock``, so a reader takes a position's source and its
    index in that source from the same draw. (Was: read apart, so a `reweight` between the two
    reads paired a new source with an index drawn in another: a sample of the wrong source, or
    an IndexError past a small source's end.) Not the storage's ``_lock``: `index_of` holds that
    while it makes every key.
    """

    def __init__(
        self, sources: Mapping[str, Storage], weights: Mapping[str, float], *, num_samples: int | None = None, seed: int = 0
    ) -> None:
        super().__init__()
        self._draw_lock = threading.Lock()
        if not sources:
            raise ConfigurationError("no sources to mix")
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
        sources, indices, repeats = [], [], []
        for number, (name, share) in enumerate(zip(self.names, self.shares.tolist())):
            size = len(self.sources[name])
            generator = np.random.default_rng([self.seed, epoch, number])
            passes = -(-share // size)
            drawn = np.concatenate([generator.permutation(size) for _ in range(passes)])[:share] if share else np.zeros(0, np.int64)
            sources.append(np.full(share, number, np.int64))
            indices.append(drawn.astype(np.int64))
            repeats.append(np.arange(share, dtype=np.int64) // size)
        # Arrays, not a string and a label per sample: keys and labels are made when asked for.
        source_of = np.concatenate(sources)
        with self._draw_lock:
            self._source_of = source_of
            self._source_index = np.concatenate(indices)
            self._repeat = np.concatenate(repeats).astype(np.int32)
            self._change = np.zeros(len(source_of), np.int32)  # the weight change that drew each
            self._keys = _MixtureKeys(self)
            self._labels = _MixtureLabels(self)
            self._index_of = None

    def reweight(self, weights: Mapping[str, float], delivered: Sequence[int] | np.ndarray, *, record: object = None) -> None:
        """Give the samples not yet delivered new weights, from now on in this epoch (and in the
        next epochs). The indices in ``delivered`` keep their samples; every other index gets a
        sample drawn anew, each source's share of them by the new weights.

        Args:
            weights: ``{name: weight}`` for every source, positive.
            delivered: Storage indices already delivered in this epoch.
            record: What `state` keeps in place of ``delivered`` (JSON), for a caller that can
                say in a few numbers what it delivered (the Loader: spans of epoch positions, a
                few however far into the epoch, where the indices are one number a sample);
                `load_state` then asks its ``resolve`` for the indices again.

        Raises:
            ValueError: Missing or non-positive weights.
        """
        self.check_weights(weights)
        chosen = np.asarray(delivered, dtype=np.int64)
        if chosen.size and (chosen.min() < 0 or chosen.max() >= len(self._source_of)):
            raise ProvenanceError(f"delivered indices must be within the mixture's {len(self._source_of)} samples")
        kept = np.zeros(len(self._source_of), dtype=bool)
        kept[chosen] = True
        change: dict[str, object] = {"weights": {name: float(weights[name]) for name in self.names}}
        change.update({"delivered": np.flatnonzero(kept).tolist()} if record is None else {"delivered_record": record})
        self.changes.append(change)
        self.weights = np.array([weights[name] for name in self.names], dtype=np.float64)
        self.shares = _shares(self.weights, self.num_samples)
        self._redraw(np.flatnonzero(~kept), len(self.changes))

    def check_weights(self, weights: Mapping[str, float]) -> None:
        """``weights`` give every source a finite positive weight (their sum finite too).

        Raises:
            ValueError: A source without a weight, a weight for no source, or one not positive.
        """
        _check_weights(weights, self.sources)

    def state(self) -> dict[str, object]:
        """The weights this epoch began with and its changes: what rebuilds its mixture."""
        return {"epoch": self.epoch, "weights": dict(zip(self.names, self._first_weights.tolist())), "changes": list(self.changes)}

    def load_state(self, state: Mapping[str, object], resolve: Callable[[object], np.ndarray] | None = None) -> None:
        """Rebuild the mixture of a saved `state`: its epoch drawn with its first weights, then
        its changes applied again in order (``resolve`` turns a change's ``record`` back into
        the storage indices it stood for; see `reweight`).

        Raises:
            ConfigurationError: A change saved as a record, and no ``resolve``.
        """
        first: Mapping[str, float] = state["weights"]  # type: ignore[assignment]
        self.check_weights(first)
        self.weights = np.array([first[name] for name in self.names], dtype=np.float64)
        self.shares = _shares(self.weights, self.num_samples)
        self.set_epoch(int(state["epoch"]))  # type: ignore[call-overload]
        for change in state["changes"]:  # type: ignore[attr-defined]
            if "delivered_record" in change:
                if resolve is None:
                    raise ConfigurationError("a mixture change saved as a delivery record needs the Loader that saved it to resolve it")
                self.reweight(change["weights"], resolve(change["delivered_record"]), record=change["delivered_record"])
            else:
                self.reweight(change["weights"], change["delivered"])

    def _redraw(self, slots: np.ndarray, change: int) -> None:
        """New samples for the storage indices ``slots``, by the current weights; a source's
        samples come in a seeded order that starts with those this epoch has not used."""
        shares = _shares(self.weights, len(slots))
        numbers, indices, repeats = [], [], []
        for number, share in enumerate(shares.tolist()):
            size = len(self.sources[self.names[number]])
            generator = np.random.default_rng([self.seed, self.epoch, number, change])
            order = generator.permutation(size)
            used = np.isin(order, self._source_index[self._source_of == number])
            ordered = np.concatenate([order[~used], order[used]])
            positions = np.arange(share, dtype=np.int64)
            numbers.append(np.full(share, number, np.int64))
            indices.append(ordered[positions % size])
            repeats.append(positions // size)
        arrangement = np.random.default_rng([self.seed, self.epoch, change, len(self.names)]).permutation(len(slots))
        targets = slots[arrangement]
        with self._draw_lock:
            self._source_of[targets] = np.concatenate(numbers)
            self._source_index[targets] = np.concatenate(indices)
            self._repeat[targets] = np.concatenate(repeats)
            self._change[targets] = change
            self._index_of = None

    def key_at(self, position: int) -> str:
        """Sample ``position``'s key: ``name/key``, ``@N`` when the N-th weight change drew it,
        ``#R`` for its R-th appearance in the epoch."""
        with self._draw_lock:
            number, index = int(self._source_of[position]), int(self._source_index[position])
            change, repeat = int(self._change[position]), int(self._repeat[position])
        name = self.names[number]
        key = self.sources[name].keys[index]
        return f"{name}/{key}" + (f"@{change}" if change else "") + (f"#{repeat + 1}" if repeat else "")

    def _label_columns(self) -> list[np.ndarray]:
        if getattr(self, "_source_labels", None) is None:
            self._source_labels = [np.asarray(label_array(self.sources[name].labels)) for name in self.names]
        return self._source_labels

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
        positions = np.asarray(indices, dtype=np.int64)
        with self._draw_lock:  # each position's source and index from one draw (copies, by the indexing)
            sources, inside = self._source_of[positions].tolist(), self._source_index[positions].tolist()
        for slot, (source, index) in enumerate(zip(sources, inside)):
            wanted.setdefault(source, []).append((slot, index))
        for source, requests in wanted.items():
            data = self.sources[self.names[source]].try_read_indices([index for _, index in requests])
            for (slot, _), payload in zip(requests, data):
                results[slot] = payload
        return results


class _MixtureKeys(Sequence[str]):
    """A mixture's keys, made when asked for (`MixedStorage.key_at`)."""

    def __init__(self, mixture: MixedStorage) -> None:
        self._mixture = mixture

    def __len__(self) -> int:
        return len(self._mixture._source_of)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._mixture.key_at(position) for position in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self._mixture.key_at(int(index) % len(self))

    def __iter__(self) -> Iterator[str]:
        return (self._mixture.key_at(position) for position in range(len(self)))


class _MixtureLabels(Sequence[Any]):
    """A mixture's labels: one at a time as its source gives it (None where it has none), and
    for an index array as numbers (-1 where there is none), as the Loader's label column."""

    def __init__(self, mixture: MixedStorage) -> None:
        self._mixture = mixture
        self._numeric: np.ndarray | None = None

    @property
    def dtype(self) -> np.dtype[Any]:
        columns = self._mixture._label_columns()
        return np.dtype(np.float64) if any(column.dtype.kind == "f" for column in columns) else np.dtype(np.int64)

    def __len__(self) -> int:
        return len(self._mixture._source_of)

    def __getitem__(self, index: Any) -> Any:
        mixture = self._mixture
        if isinstance(index, np.ndarray):
            result = np.full(index.shape, -1, self.dtype)
            if result.dtype.kind == "f":
                result[:] = np.nan
            with mixture._draw_lock:
                sources, positions = mixture._source_of[index], mixture._source_index[index]
            for number, column in enumerate(mixture._label_columns()):
                chosen = sources == number
                result[chosen] = column[positions[chosen]]
            return result
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        position = int(index) % len(self)
        with mixture._draw_lock:
            number, inside = int(mixture._source_of[position]), int(mixture._source_index[position])
        return mixture.sources[mixture.names[number]].labels[inside]

    def __iter__(self) -> Iterator[Any]:
        return (self[position] for position in range(len(self)))


def _check_weights(weights: Mapping[str, float], sources: Mapping[str, Storage]) -> None:
    # Finite, and so is their sum: an infinite weight (or two of 1e308, whose sum is) drew
    # negative shares and stopped the loop, and a state saved after it could not be loaded.
    if (
        not isinstance(weights, Mapping)
        or set(weights) != set(sources)
        or not all(_finite_positive(weights[name]) for name in sources)
        or not math.isfinite(sum(float(weights[name]) for name in sources))
    ):
        shown = str(dict(weights) if isinstance(weights, Mapping) else weights)
        raise ConfigurationError(
            f"give every source a finite positive weight; sources {sorted(sources)}, weights {shown[:300]}{' ...' if len(shown) > 300 else ''}"
        )


def _finite_positive(weight: object) -> bool:
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        return False
    try:
        number = float(weight)
    except OverflowError:  # an int past float's range
        return False
    return math.isfinite(number) and number > 0


def _shares(weights: np.ndarray, total: int) -> np.ndarray:
    """``total`` split by ``weights``, by largest remainders (the shares add up exactly)."""
    exact = weights / weights.sum() * total
    shares = np.floor(exact).astype(np.int64)
    for index in np.argsort(-(exact - shares), kind="stable")[: total - int(shares.sum())]:
        shares[index] += 1
    return shares
