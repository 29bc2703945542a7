"""Labels as one numeric column: what the Loader indexes per batch, whatever a storage keeps."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["label_array"]


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
