"""Labels as one numeric column: what the Loader indexes per batch, whatever a storage keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["NoLabels", "label_array"]


class NoLabels(Sequence[None]):
    """No label for any sample: None one at a time, and -1 for an index array (the Loader's label
    column), without an object per sample (a list of None is 8 bytes a sample). Immutable."""

    dtype = np.dtype(np.int64)

    def __init__(self, count: int) -> None:
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, np.ndarray):
            return np.full(index.shape, -1, np.int64)
        if isinstance(index, slice):
            return [None] * len(range(*index.indices(self._count)))
        if not -self._count <= index < self._count:
            raise IndexError(index)
        return None


def label_array(labels: Sequence[int | float | None]) -> np.ndarray:
    """Labels as one array: int64 with -1 where a sample has none, or float64 with NaN there
    when any label is a float (a regression target).

    Labels a storage already keeps as an array are taken as they are, and a label column that
    computes labels on demand (a sequence with a ``dtype`` that takes an index array, as
    `JsonlStorage`'s has) is kept as it is: no Python object per sample at construction."""
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "iuf":
        return labels.astype(np.float64 if labels.dtype.kind == "f" else np.int64, copy=False)
    if hasattr(labels, "dtype") and not isinstance(labels, np.ndarray):
        return labels  # type: ignore[return-value]
    if any(isinstance(label, float) for label in labels):
        return np.array([np.nan if label is None else label for label in labels], dtype=np.float64)
    return np.array([-1 if label is None else label for label in labels], dtype=np.int64)
