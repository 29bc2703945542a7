"""Metadata columns worked out once from a dataset's samples (a field of every WebDataset
``json`` member, an MDS column), kept in stoker's cache folder under the dataset's content
digest: a filter over them reads the samples on its first use only.

A column is saved as numbers (float64, NaN for a missing value) or, for anything else, as codes
into a list of distinct values (``-1`` for missing), the values as JSON; loading never unpickles.
What is read back is checked (length, kinds, codes in range) and worked out again if it fails:
the cache folder is not trusted more than any other file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .._bounded import MAX_DOCUMENT_BYTES, MAX_INDEX_BYTES, parse_json, read_json, shown_logger
from ._cache import cache_dir

__all__ = ["cached_column", "load_column", "save_column"]

_logger = shown_logger("stoker.storage")
_VERSION = 1


def cached_column(digest: str | None, source: str, name: str, count: int, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """Column ``name`` of the dataset whose content digest is ``digest`` (``source`` says where
    in it: ``"json"`` for a member's field, ``"mds"`` for a column), from the cache, else
    ``compute()`` saved there. Without a digest nothing is cached.

    Returns:
        ``count`` values: float64 for numbers, else an object array (None where missing).
    """
    saved = load_column(digest, source, name, count)
    if saved is not None:
        return saved
    values = compute()
    save_column(digest, source, name, values)
    return values


def load_column(digest: str | None, source: str, name: str, count: int) -> np.ndarray | None:
    """The column saved by `save_column`, checked to hold ``count`` values; None if there is
    none (or no digest, or what is there does not read back)."""
    return _load(cache_dir("columns"), _key(digest, source, name), count) if digest else None


def save_column(digest: str | None, source: str, name: str, values: np.ndarray) -> None:
    """Keep ``values`` for `load_column` (written beside, then renamed: never half a column); a
    failure to write is logged and the column is worked out again next time."""
    if not digest:
        return
    try:
        _save(cache_dir("columns"), _key(digest, source, name), values)
    except (OSError, TypeError, ValueError) as error:  # a value JSON cannot hold, a full disk
        _logger.info("column %r of %s not cached (%s)", name, source, error)


def _key(digest: str | None, source: str, name: str) -> str:
    return hashlib.sha256(json.dumps([_VERSION, digest, source, name]).encode()).hexdigest()[:32]


def _save(folder: Path, key: str, values: np.ndarray) -> None:
    if values.dtype.kind == "f":
        partial = folder / f"{key}.numbers.partial.npy"
        np.save(partial, values.astype(np.float64), allow_pickle=False)
        partial.replace(folder / f"{key}.numbers.npy")
        return
    distinct: dict[str, int] = {}
    codes = np.full(len(values), -1, dtype=np.int64)
    for position, value in enumerate(values):
        if value is not None:
            codes[position] = distinct.setdefault(json.dumps(value, sort_keys=True), len(distinct))
    (folder / f"{key}.values.partial.json").write_text(json.dumps(list(distinct)))
    np.save(folder / f"{key}.codes.partial.npy", codes, allow_pickle=False)
    (folder / f"{key}.values.partial.json").replace(folder / f"{key}.values.json")
    (folder / f"{key}.codes.partial.npy").replace(folder / f"{key}.codes.npy")


def _load(folder: Path, key: str, count: int) -> np.ndarray | None:
    try:
        if (folder / f"{key}.numbers.npy").is_file():
            numbers = np.load(folder / f"{key}.numbers.npy", allow_pickle=False)
            return numbers if numbers.dtype == np.float64 and numbers.shape == (count,) else None
        if not (folder / f"{key}.codes.npy").is_file():
            return None
        codes = np.load(folder / f"{key}.codes.npy", allow_pickle=False)
        distinct = read_json(folder / f"{key}.values.json", what="a column's cached values", max_bytes=MAX_INDEX_BYTES)
    except (OSError, ValueError, EOFError):  # unreadable, cut short or damaged: worked out again
        return None
    if (
        codes.dtype != np.int64
        or codes.shape != (count,)
        or not isinstance(distinct, list)
        or not all(isinstance(text, str) for text in distinct)
    ):
        return None
    if count and (int(codes.min()) < -1 or int(codes.max()) >= len(distinct)):
        return None
    table = np.empty(len(distinct) + 1, dtype=object)  # the last entry stays None
    try:
        for position, text in enumerate(distinct):
            # one at a time: a list value is one object, not a row
            table[position] = parse_json(text, f"{folder / key}.values.json", max_bytes=MAX_DOCUMENT_BYTES)
    except ValueError:
        return None
    return table[codes]  # a code of -1 picks the last entry: None
