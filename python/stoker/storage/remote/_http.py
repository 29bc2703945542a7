"""Datasets on a plain web server or CDN, named by URL: ``https://host/data/shard-{000000..000999}.tar``
(WebDataset's brace form; lists joined by ``::``), one file, or a folder URL holding a
``dataset.json`` (stoker's) or an ``index.json`` (MosaicML's MDS, LitData). Every read is a GET or
a ranged GET through the client stoker controls (`stoker._bounded.HttpClient`: bodies within a
limit per purpose, at most 5 redirects, the user's headers never sent to another origin, an
overall deadline per request), with everything `ObjectStorage` does besides (out-of-order
prefetch, retries to a deadline, hedging, block streaming, the node cache).

A web server cannot be listed, so each named file is asked for its size and ETag by ``HEAD``:
at most ``max_in_flight`` at once, the names taken one by one from the list as it is computed
(a brace list of 10^7 files is never held whole, and a task per file at once took gigabytes),
and for a list of sample files nothing is kept but that each is there.
Tar shards are read through their ``.idx`` sidecars where the server has them (as `stoker
convert --to shards` writes them); a shard without one is fetched whole once and indexed, and
the index is saved in ``$STOKER_CACHE/http-index`` under the URL, size and ETag: later opens (and
every other rank on the node) read the saved index, and a shard changed on the server is indexed
again.

A server that does not serve byte ranges (``python -m http.server``: it answers a ranged GET with
the whole file) is found at its first such answer, said once in a warning, and read from whole
local copies from then on (`WholeFiles`, in ``$STOKER_CACHE/http-files``): each file fetched
once, a shard fetched to be indexed kept as its copy where the server did not say it serves
ranges (``Accept-Ranges: bytes``). TLS: certificates verified always, against the system's roots
(or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``) and ``ca_bundle=``'s.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import tempfile
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar
from urllib.parse import quote

import numpy as np

from ..._bounded import FailureKind, HttpClient, HttpSettings, RangesNotServedError, ca_certificates, classify_http_error, shown_logger
from ...errors import StorageClosedError, StorageError
from .._cache import cache_dir
from .._labels import NoLabels
from ..formats import index_json_format, indexed_dataset, is_tfrecord_name
from ..local import SAMPLE_EXTENSIONS, build_index, parse_index, write_index
from ..policies import WholeFiles, call_with_retries, failure_line, first_line
from ._object_formats import open_tfrecords
from ._object_storage import ObjectStorage, said_size
from ._object_url import ObjectUrl
from .url_lists import parse_url_list

__all__ = ["HTTPStorage", "HttpObjects"]

logger = shown_logger("stoker.storage")

_SHARDS_INDEXED_AT_ONCE = 4
"""Shards without a sidecar fetched (to local disk) and indexed at once while opening."""

_Result = TypeVar("_Result")
_Item = TypeVar("_Item")

_WHOLE_FILE_BYTES_PER_SECOND = 1 << 20
"""The slowest a whole file may come before its fetch times out (a trickle ends there)."""


class HttpObjects:
    """The files under ``base`` on one web server, as `ObjectStorage` asks for a store's objects
    (`ObjectClient`): a key is a path under the server's root, read by GET, ranged GET and HEAD
    through `HttpClient`. A web server cannot be listed (`HTTPStorage` asks each named file for
    its size by HEAD instead).

    Args:
        base: ``scheme://server/`` (no query, no credentials: `parse_url_list` refused them).
        headers: The user's headers (sent to this origin only; never logged).
        settings: Timeouts, connections and redirects of the client.
        loop: The event loop its requests run on (the storage's own).
    """

    def __init__(
        self,
        base: str,
        headers: Mapping[str, str] | None,
        settings: HttpSettings,
        loop: Callable[[], asyncio.AbstractEventLoop],
    ) -> None:
        self.base = base if base.endswith("/") else base + "/"
        self.client = HttpClient(headers, settings, loop)

    def url(self, key: str) -> str:
        """The URL of ``key``: its path percent-encoded as object stores do (``/`` kept)."""
        return self.base + quote(key, safe="/")

    async def get(self, key: str, *, purpose: str, declared: int | None = None) -> bytes:
        return await self.client.get(self.url(key), purpose=purpose, declared=declared)

    async def get_range(self, key: str, start: int, length: int, *, purpose: str) -> bytes:
        return await self.client.get_range(self.url(key), start, length, purpose=purpose)

    async def head(self, key: str) -> dict[str, Any]:
        return (await self.client.head(self.url(key))).as_listing()

    def list(self, prefix: str | None) -> AsyncIterator[list[dict[str, Any]]]:
        raise StorageError(f"{self.base}{prefix or ''}: a web server's folder cannot be listed")

    async def download(self, key: str, write: Callable[[bytes], Awaitable[None]], *, limit: int, what: str) -> int:
        # A whole file's deadline grows with it: the request's, and a second per MiB.
        seconds = self.client.settings.timeout + limit / _WHOLE_FILE_BYTES_PER_SECOND
        return await self.client.stream(self.url(key), write, limit=limit, what=what, timeout=seconds)

    def failure_kind(self, error: BaseException) -> FailureKind:
        return classify_http_error(error)

    async def close(self) -> None:
        await self.client.close()


class HTTPStorage(ObjectStorage):
    """Samples on an HTTP(S) server (every read a GET or ranged GET).

    Args:
        urls: One URL, a brace pattern (``https://host/shard-{000000..000099}.tar``), several
            joined by ``::``, or a list of URLs; all on one server. A folder URL (ending in ``/``)
            must hold a ``dataset.json`` or an ``index.json``.
        headers: Sent with every request to the server the URLs name, such as
            ``{"Authorization": "Bearer <token>"}`` for a private dataset: never logged or put in a
            name, and dropped, every one of them, on a redirect to another origin (scheme, host,
            port).
        timeout: Seconds one request may take in all (connecting, its redirects, its whole
            body): a server that trickles its answer fails there, and is retried as an outage.
            A file fetched whole (to index it, or from a server that serves no ranges) has
            this plus a second per MiB of it.
        connect_timeout: Seconds to connect.
        ca_bundle: A PEM file of CA certificates trusted besides the system's (a private CA's);
            certificates are verified whatever it is (``SSL_CERT_FILE`` and ``SSL_CERT_DIR``
            are honoured too).
        options: `ObjectStorage`'s (payload, label, image_extensions, verify, cache_dir,
            cache_bytes, block_bytes, block_cache_bytes, max_in_flight, retry).

    Raises:
        ConfigurationError: Not http(s) URLs on one server, a URL with a query or credentials, or
            a CA bundle without certificates.
        StorageError: A file missing (named), access refused, a folder without an index, or a
            list mixing kinds of files.
        StorageUnreachableError: The server's name does not resolve, or its TLS certificate is
            not trusted (at once, naming the host and the reason).
    """

    price_table = "http"

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 5.0,
        ca_bundle: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> None:
        listed = parse_url_list(urls)
        self._names = listed.names
        location = ObjectUrl(listed.scheme, listed.server, listed.prefix)
        settings = HttpSettings(
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_connections=options.get("max_in_flight", 256),
            ca=ca_certificates(ca_bundle) if ca_bundle is not None else None,
        )
        # Each file's size, ETag and time, by key, as its HEAD said (filled as files are asked
        # for, on whichever loop reads: each entry is one dict load or store, whole by itself,
        # and two loops asking at once for a file not yet there cost one HEAD more).
        self._heads: dict[str, dict[str, Any]] = {}
        self._whole = WholeFiles(cache_dir("http-files"), listed.base.rstrip("/"))
        owner = weakref.ref(self)  # the clients run on this storage's loop, and keep no hold on it

        def loop() -> asyncio.AbstractEventLoop:
            storage = owner()
            if storage is None:
                raise StorageClosedError(f"{location.url}: the storage is gone")
            return storage.event_loop()

        super().__init__(location, open_client=lambda: HttpObjects(listed.base, headers, settings, loop), **options)

    async def _open(self) -> None:
        if self._names is None:  # a folder URL: its dataset.json or index.json says what is there
            await super()._open()
            return
        names = self._names
        kind, odd = _kind_of(names)
        if odd is not None:
            raise StorageError(
                f"{self.location.name(self.object_key(odd))}: a URL list holds tar shards, TFRecord files or images, one kind at a time"
            )
        if kind == "samples":  # one file a sample: each HEADed to know it is there, its size kept
            # 8 bytes a file (80 MB at 10^7), not an entry: a GET then reads no more than its HEAD said.
            sizes = np.full(len(names), -1, dtype=np.int64)

            def head(index: int) -> Awaitable[dict[str, Any]]:
                return self._head(names[index])

            def size(index: int, said: dict[str, Any]) -> None:
                sizes[index] = said_size(said)

            await self._each(range(len(names)), head, size)
            self._keys, self._labels = names, NoLabels(len(names))
            self._sample_sizes = sizes
            self.listed_bytes = int(sizes[sizes > 0].sum())
            return
        listing = await self._listing()
        if kind == "tar":
            await self._open_tar_list(list(names), listing)
        else:
            self._use_peer(await open_tfrecords(self, listing, self.payload, self.label_field))

    async def _listing(self) -> dict[str, dict[str, Any]]:
        """Each named file's size and ETag, by HEAD (a web server has no listing): the list's
        files, or those a folder's ``index.json`` names.

        Raises:
            StorageError: A file is missing or refused (named), or a folder URL has no index.
        """
        names = self._names if self._names is not None else await self._index_names()
        found: dict[str, dict[str, Any]] = {}
        await self._each(names, self._head, found.__setitem__)
        self._heads.update((self.object_key(name), head) for name, head in found.items())
        if not all(name.lower().endswith(SAMPLE_EXTENSIONS) for name in found):  # files read by ranges
            await self._ask_for_ranges(list(found), found)
        return found

    async def _each(
        self, names: Iterable[_Item], work: Callable[[_Item], Awaitable[_Result]], keep: Callable[[_Item, _Result], None]
    ) -> None:
        """``work`` on each of ``names`` and ``keep`` its result, at most ``max_in_flight`` at once,
        the names taken from the iterable as workers free up (a task per name up front held
        every name and task at once: gigabytes at 10^7). The first failure cancels the rest
        and is raised."""
        remaining = iter(names)

        async def worker() -> None:
            for name in remaining:  # shared by the workers: one event loop, and next() never awaits
                keep(name, await work(name))

        workers = [asyncio.ensure_future(worker()) for _ in range(self.max_in_flight)]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise

    async def _index_names(self) -> list[str]:
        index = await self._get_small("index.json")
        kind = index_json_format(index) if index is not None else None
        if index is None or kind is None:
            raise StorageError(
                f"{self.url}: a web server's folder cannot be listed, and this one has no dataset.json or index.json; "
                "name the files instead (a brace list such as https://host/shard-{000000..000099}.tar)"
            )
        return [file.name for file in indexed_dataset(kind, index, self.url, f"{self.url}/index.json", None, None).files]

    async def _head(self, name: str) -> dict[str, Any]:
        key = self.object_key(name)

        async def head() -> dict[str, Any]:
            self.traffic.request("HEAD")
            return await self.client.head(key)

        try:
            async with self._limit():
                return await call_with_retries(
                    head, policy=self.retry.for_opening(), classify=self._classify, name=self.location.name(key), counters=self.counters
                )
        except StorageError:
            raise
        except Exception as error:  # not there, refused: final
            raise StorageError(failure_line(self.location.name(key), error)) from error

    # ---- tar shards ------------------------------------------------------------------------

    async def _open_tar_list(self, names: list[str], listing: dict[str, dict[str, Any]]) -> None:
        gate = asyncio.Semaphore(_SHARDS_INDEXED_AT_ONCE)

        async def index_of(name: str) -> bytes:
            sidecar = await self._get_small(name + ".idx")
            if sidecar is not None:
                return bytes(sidecar)
            async with gate:
                return await self._built_index(name, listing[name])

        indexes: dict[str, bytes] = {}
        await self._each(names, index_of, indexes.__setitem__)
        await self._open_shards(names, [indexes[name] for name in names])
        for name, header in zip(names, self.shards):
            size = int(listing[name]["size"])
            if header.size != size:
                raise StorageError(
                    f"{self.location.name(self.object_key(name))}: the server has {size} bytes, its index is of a shard of "
                    f"{header.size} (rewritten since it was indexed?)"
                )

    async def _ask_for_ranges(self, names: list[str], listing: dict[str, dict[str, Any]]) -> None:
        """Whether the server serves byte ranges, asked by one ranged GET of a byte where its
        HEADs do not say so (``Accept-Ranges: bytes``): known before any shard is fetched to be
        indexed, that fetch is kept as the shard's copy where it does not."""
        if all(listing[name].get("accept_ranges") for name in names):
            self._whole.ranges_served()
            return
        name = next((name for name in names if int(listing[name]["size"]) > 0), None)
        if name is None:
            return
        key = self.object_key(name)
        try:
            await call_with_retries(
                lambda: ObjectStorage._ranged_get(self, key, 0, 1, purpose="metadata"),
                policy=self.retry.for_opening(),
                classify=self._classify,
                name=self.location.name(key),
                counters=self.counters,
            )
            self._whole.ranges_served()
        except RangesNotServedError:
            self._whole.no_ranges()
        except StorageError:
            raise
        except Exception as error:  # gone or refused since its HEAD: final
            raise StorageError(failure_line(self.location.name(key), error)) from error

    async def _built_index(self, name: str, meta: dict[str, Any]) -> bytes:
        """The index of a shard without a sidecar: saved by an earlier open, or built now from
        the shard fetched whole (to local disk, never held in memory)."""
        url = self.location.name(self.object_key(name))
        stamp = f"{url}\n{meta.get('size')}\n{meta.get('e_tag')}\n{meta.get('last_modified')}"
        saved = cache_dir("http-index") / (hashlib.sha256(stamp.encode()).hexdigest()[:32] + ".idx")
        if saved.exists():
            data = saved.read_bytes()
            try:  # a saved file is untrusted input like any other
                parse_index(data, PurePosixPath(name), str(saved))
                return data
            except Exception as error:
                logger.warning("%s: the saved index %s is damaged (%s); indexing the shard again", url, saved, first_line(error))
        size = int(meta["size"])
        free = shutil.disk_usage(saved.parent).free
        if size > free:  # checked before a byte is fetched: the server's size is untrusted too
            raise StorageError(
                f"{url}: {size:,} bytes to fetch once to index it, and {saved.parent} has {free:,} free "
                f"(point STOKER_CACHE at a larger disk, or publish a .idx beside each shard: stoker convert --to shards writes them)"
            )
        with tempfile.TemporaryDirectory(dir=saved.parent, prefix=".fetch-") as scratch:
            local = Path(scratch) / PurePosixPath(name).name
            await self._download(name, local, size)
            logger.info("%s: no index on the server; indexed it once (saved for later opens in %s)", url, saved.parent)

            def index() -> bytes:
                try:
                    built = build_index(local)
                except StorageError as error:  # named by the local copy: name the URL instead
                    raise type(error)(str(error).replace(str(local), url)) from error
                written = write_index(built, saved).read_bytes()
                if not self._whole.serves_ranges:  # its samples are read from a whole copy: this one, not a second fetch
                    self._whole.adopt(self.object_key(name), local, url, meta)
                return written

            return await asyncio.to_thread(index)

    async def _download(self, name: str, target: Path, size: int) -> None:
        """File ``name`` fetched whole into ``target``, streamed, retried from the start; never
        more than the ``size`` its HEAD declared (a server that sends more is refused)."""
        key = self.object_key(name)
        try:
            async with self._limit():
                await call_with_retries(
                    lambda: self._fetch_whole(key, target, size),
                    policy=self.retry,
                    classify=self._classify,
                    name=self.location.name(key),
                    counters=self.counters,
                )
        except StorageError:
            raise
        except Exception as error:
            raise StorageError(failure_line(self.location.name(key), error)) from error

    async def _fetch_whole(self, key: str, target: Path, size: int) -> None:
        """One attempt at object ``key``, whole, streamed into ``target``: at most ``size`` bytes
        (its HEAD's), counted."""
        self.traffic.request("GET")
        with open(target, "wb") as file:

            async def write(chunk: bytes) -> None:
                self.traffic.received(len(chunk))
                await asyncio.to_thread(file.write, chunk)

            await self.client.download(key, write, limit=size, what="this file (its size by HEAD)")

    # ---- a server that serves no ranges -----------------------------------------------------

    async def _ranged_get(self, key: str, start: int, length: int, *, purpose: str = "sample", copy: int = 0) -> Any:
        """`ObjectStorage._ranged_get`, or, from a server found to serve no ranges (or a file kept
        whole already), a slice of the file's local copy (`WholeFiles`: fetched once)."""
        whole = self._whole
        if not whole.local(key):
            async with whole.question():  # the first ranged GET alone: its answer says whether ranges are served
                if not whole.local(key):
                    try:
                        data = await super()._ranged_get(key, start, length, purpose=purpose, copy=copy)
                    except RangesNotServedError:
                        whole.no_ranges()
                    else:
                        whole.ranges_served()
                        return data
        head = self._heads.get(key)
        if head is None:  # a file a manifest named: not asked yet
            self.traffic.request("HEAD")
            head = self._heads[key] = await self.client.head(key)
        data = await self._whole.read(
            key, start, length, url=self.location.name(key), meta=head, fetch=lambda target, size: self._fetch_whole(key, target, size)
        )
        self.traffic.served("local copy", len(data))
        return data


def _kind_of(names: Iterable[str]) -> tuple[str | None, str | None]:
    """What a URL list holds, in one pass over the names as they are computed: ``("tar", None)``,
    ``("tfrecord", None)`` or ``("samples", None)`` (a file a sample); or ``(None, name)``, the
    first name that is none of these, or of another kind than the names before it."""
    found = None
    for name in names:
        lowered = name.lower()
        if lowered.endswith(".tar"):
            kind: str | None = "tar"
        elif ".tfrec" in lowered and is_tfrecord_name(name):  # every TFRecord marker holds ".tfrec": a cheap first test
            kind = "tfrecord"
        else:
            kind = "samples" if lowered.endswith(SAMPLE_EXTENSIONS) else None
        if kind is None or (found is not None and kind != found):
            return None, name
        found = kind
    return found, None
