"""Fields of WebDataset ``json`` members as whole columns, for a filter (`Sampling(where=...)`)
over a dataset that keeps its metadata beside each sample (``000123.json`` next to
``000123.jpg``), as LAION-style shards do.

Every sample's member is read once, in chunks (coalesced reads per shard; on an object store,
ranged GETs in flight together), and only the fields asked for are kept: numbers as float64,
anything else as objects. Where the storage has a content digest the columns are kept in the
cache folder (`load_column`), so a filter reads the members on its first use only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._bounded import shown_logger
from ..errors import ConfigurationError, StorageUnavailableError
from ._capabilities import MemberStorage
from ._column_cache import load_column, save_column
from ._protocol import Storage

__all__ = ["member_fields"]

_logger = shown_logger("stoker.storage")
_CHUNK = 4096  # samples' members read at a time: coalesced per shard, bounded memory
_MISSING = object()


def member_fields(storage: Storage, names: Sequence[str], member: str = "json") -> dict[str, np.ndarray]:
    """Each of ``names`` (a field of the ``member`` member; ``"meta.score"`` reaches into a
    nested object) for every sample of ``storage``, in storage order.

    Returns:
        Per name, ``len(storage)`` values: float64 (NaN where the field is missing or null) when
        every present value is a number, else an object array (None where missing).

    Raises:
        ConfigurationError: The storage has no members beside the payload, a field no sample
            has, or samples whose member cannot be read or parsed (the count and the first
            named): a filter is not worked out over part of a dataset.
        StorageUnavailableError: The store stayed unreachable past its retry deadline.
    """
    if not isinstance(storage, MemberStorage):
        raise ConfigurationError(f"{storage.describe()} keeps no {member} member beside each sample to take fields from")
    digest = _digest(storage)
    columns = {name: load_column(digest, member, name, len(storage)) for name in names}
    wanted = [name for name, values in columns.items() if values is None]
    if wanted:
        started = time.monotonic()
        for name, values in _read(storage, wanted, member).items():
            columns[name] = values
            save_column(digest, member, name, values)
        _logger.info(
            "read %s of %d %s members in %.1f s%s",
            ", ".join(repr(name) for name in wanted),
            len(storage),
            member,
            time.monotonic() - started,
            " (kept in the cache folder)" if digest else "",
        )
    return {name: values for name, values in columns.items() if values is not None}


def _digest(storage: Storage) -> str | None:
    content_digest = getattr(storage, "content_digest", None)
    try:
        return str(content_digest()) if callable(content_digest) else None
    except Exception:  # noqa: BLE001  # no digest to be had: nothing is cached, nothing else changes
        return None


def _read(storage: Any, names: list[str], member: str) -> dict[str, np.ndarray]:
    count = len(storage)
    numbers = {name: np.full(count, np.nan) for name in names}
    others: dict[str, np.ndarray] = {}  # made when a field first holds something not a number
    paths = {name: name.split(".") for name in names}
    failed: list[tuple[int, Exception]] = []
    present = dict.fromkeys(names, 0)
    for start in range(0, count, _CHUNK):
        indices = range(start, min(start + _CHUNK, count))
        for index, found in zip(indices, storage.try_read_members(indices, [member])):
            if isinstance(found, Exception):
                failed.append((index, found))
                continue
            for name in names:
                value = _field(found[member], paths[name])
                if value is _MISSING:
                    continue
                present[name] += 1
                if value is None:
                    continue
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    numbers[name][index] = value
                else:
                    if name not in others:
                        others[name] = np.full(count, None, dtype=object)
                    others[name][index] = value
    outage = next((error for _, error in failed if isinstance(error, StorageUnavailableError)), None)
    if outage is not None:
        raise outage  # the store stayed down past its retry deadline: an outage, not a bad filter
    if failed:
        index, error = failed[0]
        raise ConfigurationError(
            f"where: {len(failed):,} of {count:,} samples' {member} members cannot be read, the first {storage.keys[index]!r} ({error})"
        )
    absent = [name for name in names if not present[name]]
    if absent:
        raise ConfigurationError(f"where: no sample's {member} member has the field {absent[0]!r} (of {count:,} read)")
    return {name: _joined(numbers[name], others.get(name)) for name in names}


def _field(document: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(document, dict) or part not in document:
            return _MISSING
        document = document[part]
    return document


def _joined(numbers: np.ndarray, others: np.ndarray | None) -> np.ndarray:
    """Numbers alone as float64; with other values, one object array of both."""
    if others is None:
        return numbers
    present = ~np.isnan(numbers)
    others[present] = numbers[present].astype(object)
    return others
