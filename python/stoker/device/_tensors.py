"""A batch as a dict of torch tensors, the shape trainers (Lightning, Accelerate, the HF Trainer)
move to the device and hand to the training step."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._transfer import DeviceBatch, HostBatch

__all__ = ["as_tensors"]


def as_tensors(batch: HostBatch | DeviceBatch) -> dict[str, Any]:
    """``{"data", "labels", "valid", "padding", "keys", "index"}`` of a `stoker.Batch` (host
    tensors sharing its memory: no copy) or of a `DeviceBatch` (its tensors, on the device).

    ``data`` stays a list where the batch holds one (a ``decode`` function's samples);
    ``padding`` marks the samples that only even out the ranks' shares; ``keys`` are the
    samples' keys in the storage.
    """
    import torch

    if isinstance(batch, DeviceBatch):
        host: Any = batch.host
        data, labels, valid = batch.data, batch.labels, batch.valid
    else:
        host = batch
        data = torch.from_numpy(batch.data) if isinstance(batch.data, np.ndarray) else batch.data
        labels, valid = torch.from_numpy(batch.labels), torch.from_numpy(batch.valid)
    return {
        "data": data,
        "labels": labels,
        "valid": valid,
        "padding": torch.from_numpy(np.asarray(host.padding, dtype=bool)),
        "keys": list(host.keys),
        "index": int(host.index),
    }
