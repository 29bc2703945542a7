"""Coalesced positional reads of one file with a per-sample fallback: the explicit I/O that tar
shards and LMDB share (LMDBIO's coalescing), where one unreadable sample never takes its
neighbours in the same merged read down with it."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ... import _native
from ...errors import StorageError

__all__ = ["read_spans"]


def read_spans(
    path: str | os.PathLike[str],
    spans: Sequence[tuple[int, int]],
    names: Sequence[str],
    *,
    max_gap: int,
    max_read: int,
    error_type: type[StorageError] = StorageError,
) -> list[bytes | Exception]:
    """The bytes of each ``(offset, length)`` span of ``path``, read in few merged reads; if a
    merged read fails, each span is read alone and only the spans that fail then are errors
    (``error_type``, naming the sample and the file)."""
    if not spans:
        return []
    try:
        return list(_native.read_ranges(path, list(spans), max_gap, max_read))
    except OSError:
        pass
    results: list[bytes | Exception] = []
    for span, name in zip(spans, names):
        try:
            results.append(_native.read_ranges(path, [span], 0, max_read)[0])
        except OSError as error:
            results.append(error_type(f"sample {name!r} in {path}: {error}"))
    return results
