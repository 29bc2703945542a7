"""LMDB datasets (written by py-lmdb or Caffe) read with explicit I/O instead of mmap.

LMDBIO's finding: many threads faulting pages of one mmap contend in the kernel, and a B-tree
walk per sample is a chain of dependent page faults. So we walk the tree once, record where every
value sits in ``data.mdb`` (its address in the map minus the map's start), persist that offset
index, and from then on read values with ``pread``, coalesced, at most ``max_concurrent_reads``
calls at once. The index is used only while the database is unchanged: same file size,
modification time and last transaction id; otherwise it is rebuilt (or refused).

``mode="lmdb"`` keeps plain py-lmdb reads (one read transaction per call) for comparison.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..._bounded import MAX_MANIFEST_BYTES, MAX_METADATA_BYTES, read_json, shown_logger
from ...errors import ConfigurationError, StaleIndexError, StorageError
from .._cache import cache_dir
from .._protocol import Storage
from ._caffe import parse_datum
from ._lmdb_walk import walk_in_child
from ._reads import read_spans

__all__ = ["LmdbStorage"]

_logger = shown_logger("stoker.storage")
_INDEX_FORMAT = "stoker.lmdb-index"
_INDEX_VERSION = 1
CLASSES_FILE = "classes.json"
"""Beside ``data.mdb``: the class names of the labels (``stoker convert`` writes it)."""


def _data_file(path: Path) -> tuple[Path, bool]:
    """(data file, whether ``path`` is an LMDB folder)."""
    if path.is_dir():
        data = path / "data.mdb"
        if not data.exists():
            raise StorageError(f"{path}: not an LMDB folder (no data.mdb)")
        return data, True
    return path, False


class LmdbStorage(Storage):
    """Samples in an LMDB database; keys are the LMDB keys (decoded as UTF-8).

    Args:
        path: The LMDB folder (with ``data.mdb``) or the data file of a ``subdir=False`` LMDB.
        mode: ``"explicit"`` (offset index + pread, the default) or ``"lmdb"`` (py-lmdb reads).
        value_format: ``"raw"`` (a read returns the value), ``"caffe"`` (values are Caffe
            ``Datum``s: a read returns the datum's data bytes and labels come from it), or
            ``"auto"`` (caffe when the first value parses as an encoded Datum).
        on_stale: When the database changed since its index was built: ``"rebuild"`` or
            ``"error"`` (`StaleIndexError`).
        index_path: Where to keep the offset index (default: ``stoker-index.json`` beside
            ``data.mdb`` when writable, else in stoker's cache folder).
        max_gap: Largest gap in bytes between two values merged into one read (as for tar shards).
        max_read: Largest merged read in bytes.
        max_concurrent_reads: Simultaneous reads (LMDBIO's staggering, for one machine).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        StorageError: Not an LMDB database, or its map cannot be located.
        StaleIndexError: The database changed and ``on_stale="error"``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: str = "explicit",
        value_format: str = "auto",
        on_stale: str = "rebuild",
        index_path: str | os.PathLike[str] | None = None,
        max_gap: int = 16 * 1024,
        max_read: int = 4 * 1024 * 1024,
        max_concurrent_reads: int = 16,
    ) -> None:
        super().__init__(max_concurrent_reads)
        lmdb = import_lmdb()

        if mode not in ("explicit", "lmdb") or value_format not in ("raw", "caffe", "auto") or on_stale not in ("rebuild", "error"):
            raise ConfigurationError(f"bad mode {mode!r}, value_format {value_format!r} or on_stale {on_stale!r}")
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no such LMDB database")
        self.data_file, subdir = _data_file(self.path)
        self.mode = mode
        self.max_gap = max_gap
        self.max_read = max_read
        try:
            self._env: Any = lmdb.open(str(self.path), subdir=subdir, readonly=True, lock=False, readahead=False, max_readers=512)
        except lmdb.Error as error:
            raise StorageError(f"{self.path}: cannot open as LMDB ({error})") from error
        self.index_path = Path(index_path) if index_path else self._default_index_path()
        self._fingerprint = self._current_fingerprint()
        index = self._load_index()
        if index is None or index["fingerprint"] != self._fingerprint or (value_format != "auto" and index["value_format"] != value_format):
            if index is not None and on_stale == "error" and index["fingerprint"] != self._fingerprint:
                raise StaleIndexError(f"{self.path} changed since {self.index_path} was built (size, mtime or transaction id differ)")
            index = self._build_index(value_format)
            self._save_index(index)
        self.value_format: str = index["value_format"]
        self._keys: list[str] = index["keys"]
        self._labels: list[int | None] = index["labels"]
        self.classes = self._read_classes()
        self._offsets = np.asarray(index["offsets"], dtype=np.int64)
        self._lengths = np.asarray(index["lengths"], dtype=np.int64)
        if mode == "explicit":
            # Reads no longer touch the map: release it (and its page cache pressure).
            self._env.close()
            self._env = None

    def _read_classes(self) -> list[str] | None:
        """The class names in ``classes.json`` beside the data file, if there is one."""
        path = self.data_file.parent / CLASSES_FILE
        try:
            data = read_json(path, what="a class list", max_bytes=MAX_METADATA_BYTES)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise StorageError(f"{path}: not a class list ({error})") from error
        if not isinstance(data, dict) or data.get("format") != "stoker.classes" or not isinstance(data.get("classes"), list):
            raise StorageError(f"{path}: not a stoker.classes file")
        return [str(name) for name in data["classes"]]

    # ---- the offset index -----------------------------------------------------------------

    def _default_index_path(self) -> Path:
        beside = (self.path if self.path.is_dir() else self.path.parent) / "stoker-index.json"
        if os.access(beside.parent, os.W_OK):
            return beside
        digest = hashlib.sha1(str(self.data_file.resolve()).encode()).hexdigest()[:16]
        return cache_dir("lmdb-index") / f"{digest}.json"

    def _current_fingerprint(self) -> dict[str, int]:
        status = os.stat(self.data_file)
        return {"size": status.st_size, "mtime_ns": status.st_mtime_ns, "last_txnid": int(self._env.info()["last_txnid"])}

    def _load_index(self) -> dict | None:
        try:
            # A listing of every key: as large as a manifest that lists every sample.
            data = read_json(self.index_path, what="an LMDB offset index", max_bytes=MAX_MANIFEST_BYTES)
        except (OSError, ValueError):  # missing, damaged or too large: built again
            return None
        if not isinstance(data, dict) or data.get("format") != _INDEX_FORMAT or data.get("version") != _INDEX_VERSION:
            return None
        return data

    def _save_index(self, index: dict) -> None:
        temporary = self.index_path.with_name(f".{self.index_path.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps(index, separators=(",", ":")))
            temporary.replace(self.index_path)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            _logger.warning("cannot save the LMDB index to %s (%s); it is kept in memory", self.index_path, error)

    def _build_index(self, value_format: str) -> dict:
        """Walk the database once and record where every value (or Datum payload) sits: in a
        child process, where a corrupt page cannot crash this one (`_lmdb_walk`)."""
        subdir = self.path.is_dir()
        walked = walk_in_child(self.path, subdir, value_format)
        return {"format": _INDEX_FORMAT, "version": _INDEX_VERSION, "fingerprint": self._fingerprint, **walked}

    # ---- the protocol ---------------------------------------------------------------------

    def describe(self) -> str:
        return f"LMDB {self.path}"

    def _check_unchanged(self) -> None:
        status = os.stat(self.data_file)
        if status.st_size != self._fingerprint["size"] or status.st_mtime_ns != self._fingerprint["mtime_ns"]:
            raise StaleIndexError(f"{self.data_file} changed after it was indexed; reopen the storage")

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        positions = list(indices)
        if self.mode == "lmdb":
            return self._read_with_lmdb([self._keys[index] for index in positions])
        try:
            self._check_unchanged()
        except OSError as error:
            return [error] * len(positions)
        ranges = [(int(self._offsets[position]), int(self._lengths[position])) for position in positions]
        names = [self._keys[position] for position in positions]
        return read_spans(self.data_file, ranges, names, max_gap=self.max_gap, max_read=self.max_read)

    def _read_with_lmdb(self, keys: Sequence[str]) -> list[bytes | Exception]:
        results: list[bytes | Exception] = []
        with self._env.begin(buffers=True) as transaction:
            for key in keys:
                value = transaction.get(key.encode("utf-8", "surrogateescape"))
                if value is None:
                    results.append(StorageError(f"{self.path}: key {key!r} vanished from the database"))
                    continue
                if self.value_format == "caffe":
                    layout = parse_datum(value)
                    value = value[layout.data_offset : layout.data_offset + layout.data_length]
                results.append(bytes(value))
        return results

    def close(self) -> None:
        super().close()
        if self._env is not None:
            self._env.close()
            self._env = None


def import_lmdb() -> Any:
    """py-lmdb, or an ImportError saying how to get it.

    Raises:
        ImportError: py-lmdb is not installed.
    """
    try:
        import lmdb
    except ImportError as error:
        raise ImportError("LMDB storage needs py-lmdb: pip install 'stoker[lmdb]'") from error
    return lmdb
