"""`open_storage`: pick the backend from what a path holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._bounded import require_regular
from ..errors import StorageError
from ._protocol import Storage
from .formats import ARRAY_RECORD_SUFFIX, ArrayRecordStorage, LanceStorage, PeerFormatStorage, is_lance_path, is_tfrecord_name, peer_format
from .local import JSONL_SUFFIXES, PARTIAL_MARKER, FileStorage, JsonlStorage, LmdbStorage, TarShardStorage
from .remote import HTTP_SCHEMES, OBJECT_STORE_SCHEMES

__all__ = ["open_storage", "storage_format"]


def storage_format(path: str | os.PathLike[str]) -> str:
    """``"lmdb"``, ``"shards"``, ``"parquet"``, ``"jsonl"``, ``"mds"``, ``"litdata"``,
    ``"tfrecord"``, ``"datasets"`` (a ``save_to_disk`` folder), ``"array_record"``, ``"lance"``, ``"folder"`` or ``"manifest"`` for what ``path`` holds (a folder with ``*.parquet`` files at its top or in ``data/`` is
    ``"parquet"``; one with JSON Lines files at its top is ``"jsonl"``).

    Raises:
        FileNotFoundError: Nothing at ``path`` (a glob pattern matching nothing counts).
        StorageError: A file of an unknown kind, or not a regular file (a FIFO, a device).
    """
    text = str(path)
    if any(character in text for character in "*?["):
        lowered = text.lower()
        if is_tfrecord_name(lowered):
            return "tfrecord"
        if ARRAY_RECORD_SUFFIX in lowered:
            return "array_record"
        return "parquet" if lowered.endswith(".parquet") else "jsonl" if lowered.endswith(JSONL_SUFFIXES) else "shards"
    location = Path(path)
    if not location.exists():
        raise FileNotFoundError(f"{location}: no such file or folder")
    if location.is_dir():
        if is_lance_path(location):
            return "lance"
        if (location / "data.mdb").exists():
            return "lmdb"
        if (location / "dataset.json").exists() or (location / PARTIAL_MARKER).exists() or any(location.glob("*.tar")):
            return "shards"
        # Only the top and Hugging Face's data/ folder are looked at: a walk of a million-file
        # ImageFolder here would cost what its cached listing saves.
        peer = peer_format(location)  # an index.json of MosaicML's or LitData's, TFRecord files
        if peer is not None:
            return peer
        if any(location.glob("*.parquet")) or any(location.glob("data/*.parquet")):
            return "parquet"
        if any(file.name.endswith(JSONL_SUFFIXES) for file in location.iterdir()):
            return "jsonl"
        return "folder"
    require_regular(location, "a dataset")  # a FIFO blocks its reader, a device never ends
    if location.name.lower().endswith(JSONL_SUFFIXES):
        return "jsonl"
    if is_tfrecord_name(location.name):
        return "tfrecord"
    if ARRAY_RECORD_SUFFIX in location.name:
        return "array_record"
    suffix = location.suffix.lower()
    if suffix == ".tar":
        return "shards"
    if suffix == ".mdb":
        return "lmdb"
    if suffix == ".parquet":
        return "parquet"
    if suffix in (".csv", ".tsv", ".txt"):
        return "manifest"
    raise StorageError(
        f"{location}: not a dataset stoker knows (a folder, a manifest, tar shards, LMDB, Parquet, JSON Lines, MDS or TFRecord)"
    )


def open_storage(path: str | os.PathLike[str], **options: Any) -> Storage:
    """Open whatever dataset is at ``path``; ``options`` go to the backend's constructor.

    Args:
        path: A local path (a folder, shards, LMDB, Parquet, JSON Lines, a manifest, MosaicML
            Streaming's MDS shards, TFRecord files, a Hugging Face ``save_to_disk`` folder, ArrayRecord files, a Lance dataset), an object
            store prefix (``s3://bucket/prefix``, ``gs://bucket/prefix``, ``az://container/prefix``,
            also ``azure://`` and ``abfs[s]://container@account.dfs.core.windows.net/prefix``),
            Parquet objects there (``.../*.parquet``), files on a web server
            (``https://host/shard-{000000..000099}.tar``, WebDataset's brace form, or a folder
            URL with a ``dataset.json`` or ``index.json``), or ``cassandra://hosts/keyspace``.
        options: The backend's settings (credentials, endpoint, cache, ...).

    Raises:
        StorageError: Nothing stoker knows there; the message names the path.
    """
    text = str(path)
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    store = OBJECT_STORE_SCHEMES.get(scheme)
    if is_lance_path(text):  # Lance reads local folders and object stores itself
        return LanceStorage(text, **options)
    if store is not None and (text.lower().endswith(".parquet") or any(character in text for character in "*?[")):
        from .remote import open_object_parquet

        return open_object_parquet(text, **options)
    if store is not None:
        from .remote import AzureStorage, GCSStorage, S3Storage

        backend = {"s3": S3Storage, "gs": GCSStorage, "az": AzureStorage}[store]
        return backend(text, **options)
    if scheme in HTTP_SCHEMES:
        from .remote import HTTPStorage

        return HTTPStorage(text, **options)
    if scheme in ("cassandra", "scylla", "scylladb"):
        from .remote import CassandraStorage

        return CassandraStorage(text, **options)
    kind = storage_format(path)
    if kind == "lmdb":
        return LmdbStorage(path, **options)
    if kind == "shards":
        return TarShardStorage(path, **options)
    if kind == "parquet":
        from .local import ParquetStorage

        return ParquetStorage(path, **options)
    if kind == "jsonl":
        return JsonlStorage(path, **options)
    if kind in ("mds", "litdata", "tfrecord", "datasets"):
        return PeerFormatStorage(path, **options)
    if kind == "array_record":
        return ArrayRecordStorage(path, **options)
    return FileStorage(path, **options)
