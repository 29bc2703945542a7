"""Shuffle quality for `stoker bench`: what the chosen shuffle costs in mixing, against a uniform
shuffle of the same storage, so a user trades read speed for mixing knowingly."""

from __future__ import annotations

import math
from typing import Any

from ..loader import Loader
from ..sampling import Sampler, shuffle_quality
from ..storage import BlockStorage, Storage

__all__ = ["format_shuffle", "shuffle_report"]


def shuffle_report(storage: Storage, loader: Loader) -> dict[str, Any]:
    """The Loader's epoch-0 order and a uniform one over ``storage``, as `shuffle_quality` sees
    them: ``scheme``, ``window`` (block shuffle), and per order ``blocks_per_batch`` (None for
    storage without blocks), ``same_label_next`` and ``same_label_expected``."""
    blocks = storage.block_sizes() if isinstance(storage, BlockStorage) else None
    sizes = blocks if blocks is not None else [1] * len(storage)
    labels = list(storage.labels)
    sampler = loader.sampler
    uniform = Sampler(len(storage), shuffle=True, seed=sampler.seed).order()
    report: dict[str, Any] = {"scheme": sampler.scheme, "window": sampler.window if sampler.scheme == "block" else None}
    for name, order in (("chosen", sampler.order()), ("uniform", uniform)):
        quality: dict[str, float | None] = dict(shuffle_quality(order, sizes, labels, loader.batch_size))
        if blocks is None:
            quality["blocks_per_batch"] = None
        report[name] = quality
    return report


def format_shuffle(report: dict[str, Any]) -> str:
    """One line: the chosen scheme's mixing beside a uniform shuffle's."""
    chosen, uniform = report["chosen"], report["uniform"]
    scheme = f"block, window {report['window']}" if report["scheme"] == "block" else report["scheme"]
    parts = []
    if chosen["blocks_per_batch"] is not None:
        parts.append(f"{chosen['blocks_per_batch']:.1f} blocks per batch (uniform {uniform['blocks_per_batch']:.1f})")
    if not math.isnan(chosen["same_label_next"]):
        parts.append(
            f"consecutive samples share a label {chosen['same_label_next']:.3f} of the time "
            f"(uniform {uniform['same_label_next']:.3f}, independent draws {chosen['same_label_expected']:.3f})"
        )
    return f"shuffle ({scheme}): " + ("; ".join(parts) if parts else "no blocks or labels to judge it by")
