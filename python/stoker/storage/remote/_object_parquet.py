"""Parquet files on an object store (S3, GCS, Azure): `ParquetStorage` over ranged GETs.

pyarrow reads a Parquet file through any seekable file object; here that object turns each read
into one ranged GET (the store's `ObjectClient`: its length checked against the limit of a whole
file first, as the file's size is the listing's claim), retried by the `RetryPolicy` like every
other network read, and a response cut short is retried rather than handed over. pyarrow asks for the footer once, when the
storage opens (it is then kept and reused), and for a row group's payload column chunk in one
coalesced read (``pre_buffer``), so a row group, the block of the block shuffle, costs one GET.

``s3://bucket/path/*.parquet`` (a glob; Hugging Face's ``data/train-*.parquet`` layout) or
``s3://bucket/path/file.parquet``, and the same under ``gs://`` and ``az://``. Credentials as for
`S3Storage`, `GCSStorage` and `AzureStorage`; never logged.
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import io
from typing import Any

from ...errors import StorageError
from ..policies import RetryCounters, RetryPolicy, call_with_retries
from ._cloud_clients import open_azure_store, open_gcs_store
from ._object_client import ObjectClient, ObstoreObjects, retry_kind
from ._object_url import parse_object_url
from ._s3_client import open_s3_store

__all__ = ["ObjectFile", "S3ObjectFile", "open_object_parquet", "open_s3_parquet"]


def _settings_of(open_store: Any) -> tuple[Any, tuple[str, ...]]:
    """A store's client and the connection settings it takes, read from its signature (so they
    are listed once, where the client is made): the rest of the options go to `ParquetStorage`."""
    return open_store, tuple(name for name, part in inspect.signature(open_store).parameters.items() if part.kind is part.KEYWORD_ONLY)


_STORE_OPTIONS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "s3": _settings_of(open_s3_store),
    "gs": _settings_of(open_gcs_store),
    "az": _settings_of(open_azure_store),
}


class ObjectFile(io.RawIOBase):
    """One object as a read-only, seekable file: every read is a retried ranged GET.

    Args:
        client: The store's client.
        key: The object's key.
        size: Its size in bytes (from the listing).
        name: Its URL, for errors.
        retry: How failed GETs are retried.
        counters: Where retries are counted.
    """

    def __init__(self, client: ObjectClient, key: str, size: int, name: str, retry: RetryPolicy, counters: RetryCounters) -> None:
        super().__init__()
        self.client, self.key, self.size, self.name = client, key, size, name
        self.retry, self.counters = retry, counters
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def read(self, size: int = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self._position + size)
        if end <= self._position:
            return b""
        data = asyncio.run(self._get(self._position, end - self._position))
        self._position = end
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    async def _get(self, start: int, length: int) -> bytes:
        async def get() -> bytes:
            # A response cut short raises ConnectionError in the client: worth another try.
            return bytes(await self.client.get_range(self.key, start, length, purpose="file"))

        name = f"{self.name} bytes {start}-{start + length - 1}"

        def classify(error: BaseException) -> Any:
            return retry_kind(self.client.failure_kind(error))

        return await call_with_retries(get, policy=self.retry, classify=classify, name=name, counters=self.counters)


def _list(client: ObjectClient, prefix: str, pattern: str) -> list[tuple[str, int]]:
    async def pages() -> list[tuple[str, int]]:
        found = []
        async for page in client.list(prefix or None):
            for meta in page:
                if fnmatch.fnmatchcase(meta["path"], pattern):
                    found.append((meta["path"], int(meta["size"])))
        return found

    return sorted(asyncio.run(pages()))


def open_object_parquet(url: str, *, retry: RetryPolicy | None = None, **options: Any) -> Any:
    """A `ParquetStorage` over the Parquet objects at ``url`` (a glob or one object).

    Args:
        url: ``s3://bucket/path/*.parquet``, ``gs://...`` or ``az://...``, or one object.
        retry: How failed GETs are retried.
        options: The store's connection settings (as `S3Storage`, `GCSStorage` or `AzureStorage`
            take them: endpoint, credentials, timeouts), and `ParquetStorage`'s (columns, cache size).

    Raises:
        ConfigurationError: Not an object store URL.
        StorageError: No Parquet objects there, or the store cannot be listed; names the URL.
    """
    from ..local import ParquetStorage

    location = parse_object_url(url)
    opener, names = _STORE_OPTIONS[location.store]
    settings = {name: options.pop(name) for name in names if name in options}
    client = ObstoreObjects(opener(location.bucket, **settings), location.name)
    path = location.prefix
    first_wildcard = min((path.index(character) for character in "*?[" if character in path), default=len(path))
    prefix = path[:first_wildcard].rsplit("/", 1)[0] if first_wildcard < len(path) else path
    try:
        objects = _list(client, prefix, path)
    except StorageError:  # named already: an untrusted certificate, a name that does not resolve
        raise
    except Exception as error:
        raise StorageError(f"{location.url}: cannot list the objects ({type(error).__name__}: {error})") from error
    if not objects:
        raise StorageError(f"{location.url}: no Parquet objects match")
    policy = retry or RetryPolicy()
    counters = RetryCounters(location.url)
    sizes = dict(objects)
    keys = {location.name(key): key for key, _ in objects}

    def open_object(name: str) -> ObjectFile:
        key = keys[name]
        return ObjectFile(client, key, sizes[key], name, policy, counters)

    return ParquetStorage(location.url, opener=open_object, names=list(keys), **options)


def open_s3_parquet(url: str, *, retry: RetryPolicy | None = None, **options: Any) -> Any:
    """`open_object_parquet` for an ``s3://`` URL (the name it had when S3 was the only store).

    Raises:
        ConfigurationError: Not an ``s3://`` URL.
        StorageError: As `open_object_parquet`.
    """
    parse_object_url(url, "s3")
    return open_object_parquet(url, retry=retry, **options)


S3ObjectFile = ObjectFile  # the name it had when S3 was the only object store
