"""`stoker inspect`: what a dataset is, how big, how its labels are spread."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from .._bounded import shown
from ..storage import ObjectStorage, PeerFormatStorage, open_storage, storage_format
from ..storage.local import FileStorage, LmdbStorage, TarShardStorage
from ..storage.remote import OBJECT_STORE_SCHEMES

__all__ = ["format_report", "inspect_storage"]


def inspect_storage(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Describe the dataset at ``path`` as plain data (format, counts, sizes, payload types by
    count, label histogram)."""
    scheme = str(path).split("://", 1)[0].lower() if "://" in str(path) else ""
    kind = OBJECT_STORE_SCHEMES.get(scheme) or scheme or storage_format(path)
    with open_storage(path) as storage:
        report: dict[str, Any] = {"path": str(path), "format": kind, "samples": len(storage)}
        peer = storage.peer if isinstance(storage, ObjectStorage) else storage if isinstance(storage, PeerFormatStorage) else None
        if peer is not None:  # a peer's format: which, its files, and which fields a read returns
            report["layout"] = peer.dataset.format
            report["files"] = len(peer.dataset.files)
            report["bytes"] = sum(file.stored_bytes or 0 for file in peer.dataset.files)
            report["fields"] = peer.fields.describe()
        elif isinstance(storage, ObjectStorage | TarShardStorage) and storage.catalog is not None:  # tar shards, local or not
            if isinstance(storage, ObjectStorage):
                report["layout"] = storage.layout
            sizes = [shard.size for shard in storage.shards]
            report["shards"] = len(sizes)
            report["bytes"] = sum(sizes)
            report["shard_bytes"] = {"min": min(sizes), "max": max(sizes)}
            report["payload"] = storage.payload
            report["payloads"] = _by_count(storage.catalog.payload_counts())
        elif isinstance(storage, ObjectStorage):  # one object per sample
            report["layout"] = storage.layout
        elif isinstance(storage, LmdbStorage):
            report["bytes"] = storage.data_file.stat().st_size
            report["value_format"] = storage.value_format
        elif isinstance(storage, FileStorage):
            report["bytes"] = sum(os.path.getsize(storage.path_of(key)) for key in storage.keys)
            report["payloads"] = _by_count(Counter(Path(key).suffix.lstrip(".").lower() or "(none)" for key in storage.keys))
        labels = storage.labels
        if isinstance(labels, np.ndarray):  # counted as an array: no Python object per sample
            values, tallies = np.unique(labels, return_counts=True)
            missing = np.isnan(values) if labels.dtype.kind == "f" else values == -1  # how label_array marks "none"
            counts: Counter[Any] = Counter(
                {(None if none else value.item()): int(tally) for value, none, tally in zip(values, missing, tallies)}
            )
        else:
            counts = Counter(labels)
        names = storage.classes
        report["labels"] = {
            (
                "(none)" if label is None else names[label] if names and isinstance(label, int) and 0 <= label < len(names) else str(label)
            ): count
            for label, count in sorted(counts.items(), key=lambda item: (item[0] is None, item[0]))
        }
    return report


def _by_count(counts: dict[str, int]) -> dict[str, int]:
    """Payload types, the most common first: a dataset that mixes PNGs into JPEGs says so."""
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _payloads(report: dict[str, Any]) -> str:
    payloads = report.get("payloads") or {report["payload"]: report["samples"]}
    return ", ".join(f".{shown(extension, 40)} ({count})" for extension, count in payloads.items())


def _size(count: float) -> str:
    """Bytes in binary units, named as such (1 MiB = 2**20 bytes)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.1f} {unit}" if unit != "B" else f"{int(count)} B"
        count /= 1024
    raise AssertionError


def format_report(report: dict[str, Any], top: int = 20) -> str:
    """The report as text, the largest ``top`` label groups listed; names from the dataset (its
    path, label and class names, fields) shown escaped (`stoker._bounded.shown`)."""
    where = report["path"] if "://" in report["path"] else Path(report["path"])  # a Path would fold a URL's //
    lines = [f"{shown(where)}: {report['format']}, {report['samples']} samples, {_size(report.get('bytes', 0))}"]
    if "shards" in report:
        lines.append(
            f"  {report['shards']} shards of {_size(report['shard_bytes']['min'])} to {_size(report['shard_bytes']['max'])}; payloads {_payloads(report)}"
        )
    elif "fields" in report:
        lines.append(f"  {report['files']} {report['layout'].upper()} files; fields: {shown(report['fields'], 2_000)}")
    elif "payloads" in report:
        lines.append(f"  payloads {_payloads(report)}")
    if "value_format" in report:
        lines.append(f"  values: {report['value_format']}")
    labels = report["labels"]
    lines.append(f"  labels: {len(labels)} distinct")
    for name, count in sorted(labels.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"    {shown(name, 80):<30} {count:>9}  {100 * count / max(1, report['samples']):5.1f}%")
    if len(labels) > top:
        lines.append(f"    ... {len(labels) - top} more")
    return "\n".join(lines)
