"""An epoch's plan as the Loader's stages pass it on: one batch's positions, storage indices and
padding flags, and the whole plan as a lazy sequence for the per-sample prefetcher."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = ["BatchPlan", "PlanSamples"]


class BatchPlan(NamedTuple):
    """One batch's samples: epoch positions, storage indices, padding flags."""

    positions: np.ndarray
    indices: np.ndarray
    padding: np.ndarray


class PlanSamples(Sequence[tuple[int, int, tuple[str, bool]]]):
    """The epoch plan as ``(position, storage index, (key, padding))`` per sample, built per
    slice: a million-sample epoch is never a million tuples at once."""

    def __init__(
        self,
        positions: np.ndarray,
        indices: np.ndarray,
        padding: np.ndarray,
        keys: Sequence[str],
        on_slice: Callable[[int], None] | None = None,
    ) -> None:
        self.positions, self.indices, self.padding, self.keys = positions, indices, padding, keys
        # Told the end of each slice taken: the prefetcher takes the plan in order, a batch at a
        # time, so this is how far requests have got (`BlockLookahead.requested`).
        self.on_slice = on_slice

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, item: Any) -> Any:
        if not isinstance(item, slice):
            return self[item : item + 1][0]
        if self.on_slice is not None:
            self.on_slice(min(len(self.positions), item.stop if item.stop is not None else len(self.positions)))
        positions = self.positions[item].tolist()
        indices = self.indices[item].tolist()
        padding = self.padding[item].tolist()
        return [(position, index, (self.keys[index], pad)) for position, index, pad in zip(positions, indices, padding)]
