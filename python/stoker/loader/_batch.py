"""What the Loader yields: one batch with each sample's key, label and epoch position."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ops import CaptionBatch

__all__ = ["Batch"]


@dataclass
class Batch:
    """One batch.

    Attributes:
        data: The samples: an array ``(n, ...)`` when the loader decodes images, else a list.
        labels: int64 labels, -1 where a sample has none (float64 with NaN there when the
            storage's labels are float targets).
        keys: The samples' keys in the storage.
        valid: False where a sample failed to read or decode and was zero-filled
            (``on_error="zero"``), or only pads this rank to an equal count; mask these out of
            the loss.
        padding: True where a sample only pads this rank.
        positions: The samples' positions in the epoch's order (what resume bookkeeping uses).
        index: The batch's number in this rank's epoch.
        replaced: True where a bad sample was replaced by another (``on_error="skip"``); the
            slot's key and label are the replacement's, its position the bad sample's.
        extra: With the Loader's ``extra``: per sample, its other members by extension (``txt``
            as text, ``json`` parsed, others bytes); ``{}`` in a zero-filled slot. None otherwise.
        captions: With `stoker.ops.Captions` among the Loader's ``extra``: the samples'
            captions as padded token rows with their attention mask, row ``i`` sample ``i``'s
            (a zero-filled sample's row is empty).
        indices: The samples' indices in the storage (a replacement's where one was replaced).
        checksums: With a provenance ledger: the CRC-32 of each sample's bytes as read (0 where
            none were). None otherwise.
        lengths: With a provenance ledger: each sample's length in bytes (-1 where not read).
    """

    data: Any
    labels: np.ndarray
    keys: list[str]
    valid: np.ndarray
    padding: np.ndarray
    positions: np.ndarray
    index: int
    replaced: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    extra: list[dict[str, Any]] | None = None
    indices: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    checksums: np.ndarray | None = None
    lengths: np.ndarray | None = None
    captions: CaptionBatch | None = None
    # With a provenance ledger: this batch's rows, prepared by the thread that decoded it.
    _ledger_rows: Any = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.keys)

    def release(self) -> None:
        """Let the loader reuse this batch's memory: the batch drops its array (``data`` becomes
        None). The buffer is leased out again only once every array or tensor made from it is
        gone too, so a tensor kept from this batch stays intact. Batches are also released when
        collected; releasing early keeps the loader's buffer pool from growing."""
        self.data = None

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def to_torch(self, device: str | None = None, non_blocking: bool = True) -> tuple[Any, Any]:
        """(data, labels) as torch tensors sharing this batch's memory (then moved to ``device``)."""
        import torch

        data = torch.from_numpy(self.data)
        labels = torch.from_numpy(self.labels)
        if device is not None:
            data, labels = data.to(device, non_blocking=non_blocking), labels.to(device, non_blocking=non_blocking)
        return data, labels

    def to_jax(self) -> tuple[Any, Any]:
        """(data, labels) as JAX arrays (zero-copy on CPU through DLPack)."""
        import jax.numpy as jnp

        return jnp.from_dlpack(self.data), jnp.from_dlpack(self.labels)
