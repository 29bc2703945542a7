"""Orders over a storage that gained samples mid-epoch: the first part's order, then the new
samples after it (see `Sampler.set_domain`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._permutation import IndexPermutation

__all__ = ["AppendedOrder", "identity_order"]


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
