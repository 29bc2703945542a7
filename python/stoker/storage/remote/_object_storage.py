"""Object stores (S3 and S3-compatible stores, Google Cloud Storage, Azure Blob Storage): one
object per sample, or tar shards read by ranged GETs through their sidecar indexes. What a store
needs of its own (its client, its credentials, its URL) its subclass gives: `S3Storage`,
`GCSStorage`, `AzureStorage`; everything else (layouts, block streaming, hedging, retries, the
node cache, request counts) is this one class.

Every read goes through the store's `ObjectClient` (``_object_client.py``), under the body policy
of `stoker._bounded`: a whole GET within its purpose's limit (metadata, a sample, a whole file),
never sized by the length a server declares; a ranged GET whose length is checked first. The object
stores' client is obstore (Rust's ``object_store`` over reqwest/tokio), chosen by measurement on
this 2-core machine against s3proxy, 100 KB objects, 64 in flight
(`benchmarks/storage/s3_clients.py`): about 0.45-0.57 ms of CPU per GET against 1.85 ms for
aiobotocore and 2.7 ms for boto3 in threads, so the same cores sustain about 4x the request rate.
obstore's own retries are off: `RetryPolicy` retries every backend alike, and names the key when it
gives up. A web server's client is stoker's own (`HTTPStorage`).

Layout under ``<store>://bucket/prefix``:
- ``dataset.json`` of format ``stoker.shards``: tar shards with ``.idx`` sidecars (as written by
  `stoker convert --to shards`), each sample one ranged GET; or, block streaming
  (`stream_blocks`, turned on by ``Loader(shuffle="block")``), one ranged GET per block of up to
  ``block_bytes`` of consecutive samples, shared by all of them.
- ``dataset.json`` of format ``stoker.objects``: the keys, labels and classes of one object per
  sample (as written by `stoker convert` to ``s3://``), so opening needs no listing.
- ``index.json`` of MosaicML Streaming (MDS shards) or LitData, TFRecord files, or a Hugging Face
  ``save_to_disk`` folder: a peer's dataset, read in place (`_object_formats.py`).
- none of these: every image object under the prefix, listed; the first folder is the class.

Credentials are the subclass's business and are never logged or shown: `describe` and every
message name the store, bucket and key only.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from ..._bounded import MAX_MANIFEST_BYTES, parse_json
from ...errors import StorageError
from ..formats import ARRAY_RECORD_SUFFIX, index_json_format, is_tfrecord_name
from ..local import SAMPLE_EXTENSIONS, SHARD_IMAGE_EXTENSIONS, IndexHeader, ShardBlock, ShardCatalog, decode_member, header_of, parse_index
from ..policies import BlockReader, ErrorKind, HedgedCalls, RetryPolicy, SampleCache, call_with_retries, failure_line, first_line
from ._object_client import ObjectClient, retry_kind
from ._object_formats import PeerObjects, open_hf, open_indexed, open_tfrecords
from ._object_url import ObjectUrl
from ._remote import RemoteStorage

__all__ = ["OBJECTS_FORMAT", "SHARDS_FORMAT", "ObjectStorage"]

OBJECTS_FORMAT = "stoker.objects"
SHARDS_FORMAT = "stoker.shards"


class ObjectStorage(RemoteStorage):
    """Samples in an object store: the part every store shares. Open one through its subclass
    (`S3Storage`, `GCSStorage`, `AzureStorage`) or `open_storage`.

    Args:
        location: Where the data is (`parse_object_url`).
        open_client: Makes a new `ObjectClient` of the store; called once for requests and once
            more, on first need, for hedged copies (a pool of connections of their own).
        payload: Which member of a shard sample every read returns (default: chosen per sample,
            the first of ``image_extensions`` it has); of a peer's dataset, which field.
        label: A peer's dataset: the field of the labels (default: one named like a label;
            ``""``: none).
        image_extensions: The preference list for that choice.
        verify: Check each shard sample against the CRC-32 in its index, where it has them.
        cache_dir: A folder for a local cache of fetched samples (while block streaming, of whole
            blocks: later epochs read them from local disk); one per node, shared by its ranks.
        cache_bytes: The cache's size limit.
        block_bytes: Shards only: the blocks of the block shuffle and of block streaming are runs
            of a shard's samples spanning at most this many bytes.
        block_cache_bytes: Bytes of blocks kept in memory while block streaming.
        max_in_flight: Requests in flight at most (see `RemoteStorage`).
        retry: The `RetryPolicy` (see `RemoteStorage`).

    Raises:
        StorageError: Nothing there, access refused, or a manifest or index that cannot be read;
            the message names the object.
    """

    price_table = "aws-s3-standard"
    """The `PRICE_TABLES` entry a Loader prices this store's requests with by default."""

    def __init__(
        self,
        location: ObjectUrl,
        *,
        open_client: Callable[[], ObjectClient],
        payload: str | None = None,
        label: str | None = None,
        image_extensions: Sequence[str] = SHARD_IMAGE_EXTENSIONS,
        verify: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_bytes: int = 10 << 30,
        block_bytes: int = 8 << 20,
        block_cache_bytes: int = 1 << 30,
        max_in_flight: int = 256,
        retry: RetryPolicy | None = None,
    ) -> None:
        cache = SampleCache(cache_dir, cache_bytes) if cache_dir is not None else None
        super().__init__(max_in_flight=max_in_flight, retry=retry, cache=cache)
        self.location = location
        self.url = location.url  # canonical: whatever the user typed after it (a query) stays out of names
        self.bucket, self.prefix = location.bucket, location.prefix
        self._open_client = open_client
        self.client = open_client()
        self._copy_client: ObjectClient | None = None
        self._loop_closers.append(self.client.close)
        self.layout = "objects"
        # The objects' bytes as listed (one object a sample, found by listing); None: not listed.
        self.listed_bytes: int | None = None
        # Each sample object's size as its listing or HEAD said, by index (-1: not said); a GET
        # reads no more than that, so a server that sends an endless body for a 100-byte object
        # is refused at byte 101, not at the 2 GiB a sample may have (with hundreds in flight).
        self._sample_sizes: np.ndarray | None = None
        self.shards: list[IndexHeader] = []
        self.payload = payload
        self.label_field = label
        self.peer: PeerObjects | None = None
        self.image_extensions = tuple(image_extensions)
        self.catalog: ShardCatalog | None = None
        self.verify = verify
        self.block_bytes = block_bytes
        self.block_cache_bytes = block_cache_bytes
        self._block_reader: BlockReader | None = None
        self.block_downloads = 0
        self._hedged_blocks = HedgedCalls()
        # The manifest is raced from the start (two copies, the first answer used): the open
        # waits on it alone, and nothing is known yet of how long a request takes.
        self._hedged_small = HedgedCalls(first_patience=0.0)
        try:
            self.run(self._open())
        except BaseException:
            self.close()
            raise

    def _client_for(self, copy: int) -> ObjectClient:
        """The client for a request (0) or its hedged copy (1): copies have a client, so a pool of
        connections, of their own, as a connection that is slow (to a busy front end, over a
        congested route) usually stays slow, and a copy sent over it would be too. Made on the
        storage's loop thread (where copies are sent)."""
        if copy == 0:
            return self.client
        if self._copy_client is None:
            self._copy_client = self._open_client()
            self._loop_closers.append(self._copy_client.close)
        return self._copy_client

    def object_key(self, name: str) -> str:
        """The full object key of ``name`` under the prefix."""
        return self.location.key(name)

    def _block(self, number: int) -> ShardBlock:
        assert self.catalog is not None
        return self.catalog.block(number, self.block_bytes)

    def block_sizes(self) -> list[int] | None:
        """Samples per block (tar shards: runs of a shard's samples starting within the same
        ``block_bytes`` of it); None for one object per sample."""
        if self.peer is not None:
            return self.peer.table.samples_per_file()
        return self.catalog.block_sizes(self.block_bytes) if self.layout == "shards" and self.catalog is not None else None

    def max_open_blocks(self) -> int | None:
        """See `ShardCatalog.max_open_blocks` (with ``block_cache_bytes``); None for one object
        per sample."""
        if self.peer is not None:
            return self.peer.max_open_blocks()
        if self.layout != "shards" or self.catalog is None:
            return None
        return self.catalog.max_open_blocks(self.block_bytes, self.block_cache_bytes)

    def stream_blocks(self) -> None:
        """Read shards a block at a time from now on: the first sample asked for from a block
        fetches the whole block in one ranged GET, and its other samples are served from memory
        (see `BlockReader`). `Loader(shuffle="block")` turns this on. One object per sample is
        read as before."""
        if self.layout == "shards" and self._block_reader is None:
            self._block_reader = BlockReader(
                self._fetch_block, self._own_loop, self.block_cache_bytes, lambda number: self._block(number).samples
            )

    def prefetch_blocks(self, blocks: Sequence[int]) -> None:
        """`Storage.prefetch_blocks`: each block not in memory or on its way is fetched now (one
        ranged GET, hedged and retried like any block fetch); a peer's compressed files whole."""
        if self.peer is not None and not self._closed:
            self.peer.prefetch(blocks)
        if self._block_reader is not None and not self._closed:  # a hint is no place for "closed"
            for number in blocks:
                self._block_reader.prefetch(number)

    async def fetch_index(self, index: int) -> bytes:
        """`RemoteStorage.fetch_index`; while block streaming, a slice of the sample's block
        (whose fetch carries the retries and the request limit) and its CRC check, with no
        request of its own: per-sample overhead is what bounds small samples."""
        if self._block_reader is None:
            return await super().fetch_index(index)
        try:
            data = await self._request(index)
        except StorageError:  # unavailable past the deadline, or a verdict such as a bad checksum
            raise
        except Exception as error:  # a final error (the shard gone, access refused): name the sample
            raise StorageError(failure_line(self.sample_name(index), error)) from error
        self._count_fetched(data)
        return data

    async def _fetch_block(self, number: int) -> memoryview:
        block = self._block(number)
        key = self.object_key(self.shards[block.shard].shard.name)
        length = block.end - block.start

        async def get(copy: int) -> memoryview:
            # A view of the client's buffer: a block is not copied whole, only each sample's slice.
            return memoryview(await self._ranged_get(key, block.start, length, copy=copy))

        name = f"{self.location.name(key)} bytes {block.start}-{block.end - 1}"
        claim = None
        if self.cache is not None:
            # The node's cache (a hit, a wait for another rank's fetch, or ours to fetch), read
            # off the event loop: a block is megabytes.
            cached, claim = await self.cache.get_or_claim(name, in_thread=True)
            if cached is not None and len(cached) == length:
                return memoryview(cached)
        try:
            async with self._limit():
                data = await self._hedged_blocks.call(
                    lambda copy: call_with_retries(
                        lambda: get(copy), policy=self.retry, classify=self._classify, name=name, counters=self.counters
                    )
                )
        except BaseException:  # failed or cancelled: another request may fetch it
            if self.cache is not None:
                self.cache.release(name, claim)
            raise
        self.block_downloads += 1
        if self.cache is not None:
            await self.cache.store(name, data, claim)
        return data

    async def _ranged_get(self, key: str, start: int, length: int, *, purpose: str = "sample", copy: int = 0) -> Any:
        """``length`` bytes of object ``key`` from ``start`` (a bytes-like object): one ranged GET
        by the client of ``copy`` (`_client_for`), counted. One attempt: the caller retries."""
        self.traffic.request("ranged GET")
        data = await self._client_for(copy).get_range(key, start, length, purpose=purpose)
        self.traffic.received(len(data))
        return data

    def _sample_cache(self) -> SampleCache | None:
        # While block streaming, the cache holds whole blocks (see `_fetch_block`), not samples.
        return self.cache if self._block_reader is None else None

    def stats(self) -> dict[str, int]:
        """`RemoteStorage.stats`, and while block streaming ``block_fetches`` (blocks loaded),
        ``block_downloads`` (of those, the ones read from the server, not the local cache),
        ``block_copies`` (fetches that ran long and were sent again; ``block_copies_won``: the
        copy answered first) and ``block_bytes_held`` (blocks in memory now)."""
        counts = super().stats()
        if self._block_reader is not None:
            counts["block_fetches"] = self._block_reader.fetches
            counts["block_downloads"] = self.block_downloads
            counts["block_copies"] = self._hedged_blocks.copies
            counts["block_copies_won"] = self._hedged_blocks.copies_won
            counts["block_bytes_held"] = self._block_reader.bytes_held
        return counts

    def describe(self) -> str:
        return self.url

    def sample_name(self, index: int) -> str:
        if self.peer is not None:
            return self.peer.sample_name(index)
        if self.layout == "shards" and self.catalog is not None:
            number, _ = self.catalog.locate(index)
            return f"{self.location.name(self.object_key(self.shards[number].shard.name))}#{self.catalog.key(index)}"
        return self.location.name(self.object_key(self._keys[index]))

    def _classify(self, error: BaseException) -> ErrorKind:
        return retry_kind(self.client.failure_kind(error))

    # ---- opening --------------------------------------------------------------------------

    async def _get_small(self, name: str) -> bytes | None:
        """A metadata object (manifest, index, state) with retries, within the metadata limit;
        None if missing.

        Raises:
            StorageError: Access refused, over the limit, or the server kept failing.
        """

        async def get(client: ObjectClient) -> bytes:
            started = time.monotonic()
            self.traffic.request("GET")
            data = await client.get(self.object_key(name), purpose="metadata")
            self.traffic.received(len(data))
            self._latencies.append(time.monotonic() - started)
            return data

        try:
            # Counted with the reads: an unreachable endpoint is reported every few seconds.
            # Hedged: one index on a slow connection would hold up the whole open.
            return await self._hedged_small.call(
                lambda copy: call_with_retries(
                    lambda: get(self._client_for(copy)),
                    policy=self.retry.for_opening(),
                    classify=self._classify,
                    name=self.location.name(self.object_key(name)),
                    counters=self.counters,
                )
            )
        except StorageError:  # a verdict (too large, a redirect refused), or unavailable past the deadline
            raise
        except Exception as error:
            kind = self.client.failure_kind(error)
            if kind == "missing":
                return None
            if kind == "refused":
                raise StorageError(f"{self.url}: access denied reading {name} (check the credentials): {first_line(error)}") from error
            raise StorageError(f"{self.url}: cannot read {name}: {first_line(error)}") from error

    async def _open(self) -> None:
        manifest_bytes = await self._get_small("dataset.json")
        if manifest_bytes is None:
            index = await self._get_small("index.json")
            kind = index_json_format(index) if index is not None else None
            if index is not None and kind is not None:  # MosaicML's MDS shards or LitData's chunks
                self._use_peer(await open_indexed(self, kind, index, await self._listing(), self.payload, self.label_field))
                return
            await self._open_listing()
            return
        try:
            manifest = parse_json(manifest_bytes, f"{self.url}/dataset.json", max_bytes=MAX_MANIFEST_BYTES)
            kind = manifest["format"]
            self.classes = manifest.get("classes")
            if kind == OBJECTS_FORMAT:
                self._keys = [str(sample[0]) for sample in manifest["samples"]]
                self._labels = [sample[1] for sample in manifest["samples"]]
            elif kind == SHARDS_FORMAT:
                names = [shard["name"] for shard in manifest["shards"]]
                # `upload_to_s3` puts small indexes inside the manifest: the open is one round trip.
                inline = [shard.get("index") for shard in manifest["shards"]]
            else:
                raise StorageError(f"{self.url}/dataset.json: unknown format {kind!r}")
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
            raise StorageError(f"{self.url}/dataset.json: not a stoker manifest ({type(error).__name__}: {error})") from error
        if kind == SHARDS_FORMAT:
            await self._open_shards(names, inline)

    async def _open_shards(self, names: list[str], inline: list[Any]) -> None:
        """The shards' indexes: from the manifest where it carries them, else their sidecars."""

        async def sidecar(name: str, carried: Any) -> Any:
            if carried is not None:
                return carried
            data = await self._get_small(name + ".idx")
            if data is None:
                raise StorageError(f"{self.url}: shard {name} has no index {name}.idx")
            return bytes(data)  # version 3 bytes or a JSON document: `parse_index` reads either

        indexes = await asyncio.gather(*(sidecar(name, carried) for name, carried in zip(names, inline)))
        for name, carried, data in zip(names, inline, indexes):
            source = f"{self.url}/dataset.json (the index of {name})" if carried is not None else f"{self.url}/{name}.idx"
            try:
                index = parse_index(data, PurePosixPath(name), source)
            except (ValueError, KeyError, TypeError, IndexError) as error:
                raise StorageError(f"{source}: not a valid index ({type(error).__name__}: {error})") from error
            self.shards.append(header_of(index))
        self.catalog = ShardCatalog(
            self.shards,
            payload=self.payload,
            image_extensions=self.image_extensions,
            classes=self.classes,
            name_of=lambda number, key: f"{self.location.name(self.object_key(self.shards[number].shard.name))}#{key}",
        )
        self.classes = self.catalog.classes
        self._keys, self._labels = self.catalog.keys, self.catalog.labels
        self.layout = "shards"
        if self.payload is None:
            counts = self.catalog.payload_counts()
            self.payload = max(counts, key=counts.__getitem__) if counts else "jpg"

    def _use_peer(self, peer: PeerObjects) -> None:
        """Read a peer's dataset from now on: its table's keys and labels."""
        self.peer = peer
        self.layout = "peer"
        self._keys, self._labels = peer.table.keys, peer.table.labels  # type: ignore[assignment]
        self.payload = peer.fields.payload
        self.classes = peer.dataset.classes

    async def _listing(self) -> dict[str, dict[str, Any]]:
        """Every object under the prefix: its name relative to the prefix, to its listing
        entry (size, ETag, time).

        Raises:
            StorageError: The listing failed; names the prefix.
        """
        found: dict[str, dict[str, Any]] = {}
        base = f"{self.prefix}/" if self.prefix else ""
        try:
            pages = 0
            async for chunk in self.client.list(self.prefix or None):
                pages += 1  # a page of up to 1,000 keys is one LIST request
                for meta in chunk:
                    found[meta["path"][len(base) :]] = meta
            for _ in range(max(pages, 1)):  # an empty listing is one request too
                self.traffic.request("LIST")
        except Exception as error:
            raise StorageError(f"{self.url}: cannot list the objects ({type(error).__name__}: {error})") from error
        return found

    async def _open_listing(self) -> None:
        listing = await self._listing()
        names = [name for name in listing if name.lower().endswith(SAMPLE_EXTENSIONS)]
        parquet = [name for name in listing if name.lower().endswith(".parquet")]
        records = {name: meta for name, meta in listing.items() if is_tfrecord_name(name)}
        if not names and any(ARRAY_RECORD_SUFFIX in name for name in listing):
            raise StorageError(
                f"{self.url}: holds ArrayRecord files, which stoker reads from local disk only (their reader, Google's array_record, "
                "reads local paths, and their records are compressed together, so a sample is not a range to fetch); copy them to a local disk"
            )
        if not names and records:
            self._use_peer(await open_tfrecords(self, records, self.payload, self.label_field))
            return
        if not names and "state.json" in listing and any(name.endswith(".arrow") for name in listing):
            self._use_peer(await open_hf(self, listing, self.payload, self.label_field))
            return
        if not names and parquet:
            folder = parquet[0].rsplit("/", 1)[0] + "/" if "/" in parquet[0] else ""
            raise StorageError(f"{self.url}: holds Parquet files; open them with open_storage('{self.url}/{folder}*.parquet')")
        if not names:
            raise StorageError(f"{self.url}: no dataset.json and no image objects under this prefix")
        names.sort()
        self.listed_bytes = sum(int(listing[name].get("size") or 0) for name in names)
        self._sample_sizes = np.array([said_size(listing[name]) for name in names], dtype=np.int64)
        if all("/" in name for name in names):
            self.classes = sorted({name.split("/", 1)[0] for name in names})
            position = {name: index for index, name in enumerate(self.classes)}
            self._labels = [position[name.split("/", 1)[0]] for name in names]
        else:
            self._labels = [None] * len(names)
        self._keys = names

    # ---- reads ----------------------------------------------------------------------------

    async def _request(self, index: int, extension: str | None = None) -> bytes:
        if self.peer is not None:
            return await self.peer.request(index)
        if self.layout == "shards":
            assert self.catalog is not None
            number, _ = self.catalog.locate(index)
            shard = self.shards[number]
            member, (offset, size) = self.catalog.span(index, extension)
            if self._block_reader is not None:
                number = self.catalog.block_of(index, self.block_bytes)
                start = offset - self._block(number).start
                data = bytes((await self._block_reader.block(number))[start : start + size])
                self.traffic.served("block cache", len(data))
                if extension is None:  # the payload: each sample's one read of the epoch
                    self._block_reader.served(number)
            else:
                data = bytes(await self._ranged_get(self.object_key(shard.shard.name), offset, size))
            corrupt = self.catalog.corruption(index, member, data, lambda: self.sample_name(index)) if self.verify else None
            if corrupt is not None:
                raise corrupt
            return data
        self.traffic.request("GET")
        sizes = self._sample_sizes
        declared = int(sizes[index]) if sizes is not None and sizes[index] >= 0 else None
        data = await self.client.get(self.object_key(self._keys[index]), purpose="sample", declared=declared)
        self.traffic.received(len(data))
        return data

    def try_read_members(self, indices: Sequence[int], extensions: Sequence[str]) -> list[dict[str, Any] | Exception]:
        """Members ``extensions`` of each shard sample, decoded as `decode_member` does, one
        retried ranged GET each; an exception in place of a sample that lacks one or fails.

        Raises:
            StorageError: The bucket holds one object per sample, which has no other members.
        """
        if self.layout == "peer":
            raise StorageError(f"{self.url}: a peer's dataset returns one field per read; open it again with payload= to read another")
        if self.layout != "shards":
            raise StorageError(f"{self.url}: one object per sample has no other members to read; extra members need tar shards")
        return self.run(self._gather_members(indices, list(extensions)))

    async def _gather_members(self, indices: Sequence[int], extensions: list[str]) -> list[dict[str, Any] | Exception]:
        async def one(index: int) -> dict[str, Any]:
            name = self.sample_name(index)
            async with self._limit():
                try:
                    parts = [
                        await call_with_retries(
                            lambda extension=extension: self._request(index, extension),  # type: ignore[misc]
                            policy=self.retry,
                            classify=self._classify,
                            name=name,
                            counters=self.counters,
                        )
                        for extension in extensions
                    ]
                except StorageError:
                    raise
                except Exception as error:  # a final error (missing object, refused): name the sample
                    raise StorageError(failure_line(name, error)) from error
            try:
                return {extension: decode_member(extension, data) for extension, data in zip(extensions, parts)}
            except ValueError as error:
                raise StorageError(f"{name}: a member does not decode ({error})") from error

        results = await asyncio.gather(*(one(index) for index in indices), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
        return results  # type: ignore[return-value]


def said_size(meta: dict[str, Any]) -> int:
    """An object's size as its listing or HEAD said it, or -1 where it said none."""
    size = meta.get("size")
    return int(size) if size is not None else -1
