"""`open_storage`: pick the backend from what a path holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._errors import StorageError
from ._files import FileStorage
from ._lmdb import LmdbStorage
from ._protocol import Storage
from ._tar import PARTIAL_MARKER, TarShardStorage

__all__ = ["open_storage", "storage_format"]


def storage_format(path: str | os.PathLike[str]) -> str:
    """``"lmdb"``, ``"shards"``, ``"folder"`` or ``"manifest"`` for what ``path`` holds.

    Raises:
        FileNotFoundError: Nothing at ``path`` (a glob pattern matching nothing counts).
        StorageError: A file of an unknown kind.
    """
    text = str(path)
    if any(character in text for character in "*?["):
        return "shards"
    location = Path(path)
    if not location.exists():
        raise FileNotFoundError(f"{location}: no such file or folder")
    if location.is_dir():
        if (location / "data.mdb").exists():
            return "lmdb"
        if (location / "dataset.json").exists() or (location / PARTIAL_MARKER).exists() or any(location.glob("*.tar")):
            return "shards"
        return "folder"
    suffix = location.suffix.lower()
    if suffix == ".tar":
        return "shards"
    if suffix == ".mdb":
        return "lmdb"
    if suffix in (".csv", ".tsv", ".txt"):
        return "manifest"
    raise StorageError(f"{location}: not a dataset stoker knows (a folder, a manifest, tar shards or LMDB)")


def open_storage(path: str | os.PathLike[str], **options: Any) -> Storage:
    """Open whatever dataset is at ``path`` (a local path, ``s3://bucket/prefix`` or
    ``cassandra://hosts/keyspace``); ``options`` go to the backend's constructor."""
    text = str(path)
    if text.startswith("s3://"):
        from ._s3 import S3Storage

        return S3Storage(text, **options)
    if text.startswith(("cassandra://", "scylla://", "scylladb://")):
        from ._cassandra import CassandraStorage

        return CassandraStorage(text, **options)
    kind = storage_format(path)
    if kind == "lmdb":
        return LmdbStorage(path, **options)
    if kind == "shards":
        return TarShardStorage(path, **options)
    return FileStorage(path, **options)
