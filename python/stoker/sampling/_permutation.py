"""A seeded permutation of [0, n) evaluated position by position: the uniform shuffle's order,
computed, not stored.

Drawing a permutation of n samples and keeping it costs 8 bytes a sample (8 GB for an epoch of a
billion); evaluating one where it is needed costs nothing to keep. A Feistel network is a
bijection on the integers of 2h bits for any round function, so it permutes [0, 4^h); cycle
walking (applying it again to a value that lands at n or past it, until one lands inside) turns
it into a bijection on [0, n), since the walk from a value inside can only end inside. With
4^h < 4n, a walk takes under four steps on average. The round function mixes the half-word with a
key drawn from (seed, epoch, round) by splitmix64, as Grain's index shuffle and other on-the-fly
shuffles do; six rounds make the order look uniform to every statistic tests look at (see
tests/sampling/test_permutation.py).

All work is vectorized over a chunk of positions with NumPy's uint64 arithmetic (wrapping, as the
hash needs). Beside it, the two other orders a Sampler composes from it: storage order
(`identity_order`), and the order of a storage that gained samples mid-epoch (`AppendedOrder`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ConfigurationError

__all__ = ["AppendedOrder", "IndexPermutation", "identity_order"]

_ROUNDS = 6
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def _splitmix(values: np.ndarray) -> np.ndarray:
    values = values + _GOLDEN
    values = (values ^ (values >> np.uint64(30))) * _MIX_1
    values = (values ^ (values >> np.uint64(27))) * _MIX_2
    return values ^ (values >> np.uint64(31))


class IndexPermutation:
    """A permutation of [0, ``size``) drawn from (``seed``, ``epoch``), evaluated on demand.

    Args:
        size: The domain's size (at least 1).
        seed: With ``epoch``, decides the permutation.
        epoch: With ``seed``, decides the permutation.

    Raises:
        ValueError: ``size`` below 1 or over 2**62.
    """

    def __init__(self, size: int, seed: int, epoch: int) -> None:
        if not 1 <= size <= 1 << 62:
            raise ConfigurationError(f"a permutation needs 1 to 2**62 elements, got {size}")
        self.size = size
        self._half = max(1, (max(size - 1, 1).bit_length() + 1) // 2)  # bits per half: 4**half >= size
        self._mask = np.uint64((1 << self._half) - 1)
        with np.errstate(over="ignore"):
            base = _splitmix(np.array([seed & (2**64 - 1)], np.uint64) ^ _splitmix(np.array([epoch & (2**64 - 1)], np.uint64)))
            self._keys = _splitmix(base + np.arange(1, _ROUNDS + 1, dtype=np.uint64))

    def _network(self, values: np.ndarray) -> np.ndarray:
        half = np.uint64(self._half)
        left, right = values >> half, values & self._mask
        with np.errstate(over="ignore"):
            for key in self._keys:
                left, right = right, left ^ (_splitmix(right ^ key) & self._mask)
        return (left << half) | right

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The permuted value of each of ``positions`` (each in [0, size)), as int64."""
        values = self._network(np.asarray(positions, dtype=np.uint64))
        outside = np.flatnonzero(values >= np.uint64(self.size))
        while outside.size:
            values[outside] = self._network(values[outside])
            outside = outside[values[outside] >= np.uint64(self.size)]
        return values.astype(np.int64)


def identity_order(positions: np.ndarray) -> np.ndarray:
    """Storage order: position p is sample p."""
    return np.asarray(positions, np.int64)


class AppendedOrder:
    """An order over ``base`` samples followed by ``appended`` more, those shuffled among
    themselves (their own seeded permutation) when the order shuffles."""

    def __init__(self, first: Callable[[np.ndarray], np.ndarray], base: int, appended: int, shuffle: bool, seed: int, epoch: int) -> None:
        self.first, self.base = first, base
        # Salted so the appended samples' order is not a prefix of the first part's.
        self.rest: Callable[[np.ndarray], np.ndarray] = (
            IndexPermutation(appended, seed ^ 0x5EED_A99E_0DED, epoch) if shuffle else identity_order
        )

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, np.int64)
        out = np.empty(positions.shape, np.int64)
        early = positions < self.base
        out[early] = self.first(positions[early])
        out[~early] = self.base + self.rest(positions[~early] - self.base)
        return out
