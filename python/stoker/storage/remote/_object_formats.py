"""The peers' formats on an object store (MosaicML's MDS shards, LitData's chunks, TFRecord
files, Hugging Face
``save_to_disk`` folders): what
`ObjectStorage` does when a prefix holds one of them.

Opening lists the prefix once (each file's size and ETag: a file rewritten in place gets a new
table) and loads the `RecordTable` an earlier open saved, or builds it: every file fetched whole
once (a few at a time, each retried like any read) and scanned off the event loop. A read is
then one ranged GET of the sample's payload (raw files), or a slice of its file fetched whole
and inflated once (compressed files: their bytes cannot be read by range), held within
``block_cache_bytes``; requests for a file already on its way wait for it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

from ...errors import StorageError
from ..formats import PeerDataset, RecordTable, hf_dataset, indexed_dataset, tfrecord_dataset
from ..policies import call_with_retries, failure_line


class HostStorage(Protocol):
    """What these functions use of `ObjectStorage` (named by its members, not imported: it
    imports this module)."""

    location: Any
    url: str
    client: Any
    traffic: Any
    retry: Any
    block_cache_bytes: int

    @property
    def counters(self) -> Any: ...

    def object_key(self, name: str) -> str: ...
    def _limit(self) -> Any: ...
    def _classify(self, error: BaseException) -> Any: ...
    def _own_loop(self) -> asyncio.AbstractEventLoop: ...
    async def _get_small(self, name: str) -> bytes | None: ...
    async def _ranged_get(self, key: str, start: int, length: int, *, purpose: str = "sample", copy: int = 0) -> Any: ...


__all__ = ["PeerObjects", "open_hf", "open_indexed", "open_tfrecords"]

_FILES_AT_ONCE = 8
"""Whole files fetched at once while a table is built (each is held while it is scanned)."""


class PeerObjects:
    """A peer's dataset under an object store prefix: its table, and its compressed files held
    inflated."""

    def __init__(self, storage: HostStorage, dataset: PeerDataset, table: RecordTable) -> None:
        self.storage = storage
        self.dataset = dataset
        self.table = table
        assert dataset.fields is not None
        self.fields = dataset.fields
        self._held: OrderedDict[int, bytes | memoryview] = OrderedDict()
        self._held_bytes = 0
        self._coming: dict[int, asyncio.Future[bytes | memoryview]] = {}

    def file_name(self, number: int) -> str:
        """The file's object URL (never credentials)."""
        return self.storage.location.name(self.storage.object_key(self.dataset.files[number].name))

    def sample_name(self, index: int) -> str:
        number, position = self.table.locate(index)
        return f"{self.file_name(number)}#{position}"

    async def request(self, index: int) -> bytes:
        """One attempt at a sample's payload (the caller retries)."""
        number, offset, length = self.table.span(index)
        file = self.dataset.files[number]
        if file.compression is None:
            storage = self.storage
            return bytes(await storage._ranged_get(storage.object_key(file.name), offset, length))
        raw = await self.raw(number)
        self.storage.traffic.served("block cache", length)
        return bytes(raw[offset : offset + length])

    async def raw(self, number: int) -> bytes | memoryview:
        """A compressed file's inflated bytes: held, on its way, or fetched now (with retries).

        ``_held``, ``_held_bytes`` and ``_coming`` are owned by the storage's own loop thread: a
        call from another loop (a pipeline's prefetcher) is run there. (Was: run on the caller's
        loop, so two loops' threads updated the tables at once, and a file on its way on one
        loop was awaited from another, which asyncio refuses.)"""
        own = self.storage._own_loop()
        if asyncio.get_running_loop() is not own:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.raw(number), own))
        held = self._held.get(number)
        if held is not None:
            self._held.move_to_end(number)
            return held
        coming = self._coming.get(number)
        if coming is None:
            coming = asyncio.get_running_loop().create_future()
            self._coming[number] = coming
            try:
                data = await self.fetch_raw(number)
            except BaseException as error:
                self._coming.pop(number, None)
                # Waiters see the error, or a cancelled fetch as one worth retrying.
                coming.set_exception(error if isinstance(error, Exception) else ConnectionError("the fetch of this file was cancelled"))
                coming.exception()  # retrieved: nothing logs "never retrieved"
                raise
            self._coming.pop(number, None)
            self._held[number] = data
            self._held_bytes += len(data)
            while self._held_bytes > self.storage.block_cache_bytes and len(self._held) > 1:
                _, dropped = self._held.popitem(last=False)
                self._held_bytes -= len(dropped)
            coming.set_result(data)
            return data
        return await asyncio.shield(coming)

    async def fetch_raw(self, number: int) -> bytes | memoryview:
        """File ``number`` fetched whole (retried), inflated and checked off the event loop."""
        storage = self.storage
        name = self.file_name(number)
        file = self.dataset.files[number]
        stored = await fetch_whole(storage, file.name, file.stored_bytes)
        return await asyncio.to_thread(self.dataset.raw, number, stored, name)

    def prefetch(self, blocks: Sequence[int]) -> None:
        """Start fetching compressed files ``blocks`` (file numbers) not held or coming. The two
        tables are read from this thread without the loop's say: each test is one dict lookup,
        and a stale answer costs one call of `raw` on the loop, which looks again."""
        loop = self.storage._own_loop()
        for number in blocks:
            if self.dataset.files[number].compression is not None and number not in self._held and number not in self._coming:
                asyncio.run_coroutine_threadsafe(_quietly(self.raw(number)), loop)

    def max_open_blocks(self) -> int | None:
        sizes = [file.raw_bytes or 0 for file in self.dataset.files if file.compression is not None]
        if not sizes:
            return None
        return max(1, self.storage.block_cache_bytes // max(1, sum(sizes) // len(sizes)))


async def _quietly(coroutine: Any) -> None:
    try:
        await coroutine
    except Exception:  # a prefetch's failure is met again, and reported, by the read that needs it
        pass


async def fetch_whole(storage: HostStorage, name: str, declared: int | None) -> bytes:
    """Object ``name`` under the prefix, whole, retried like any read: within the limit of a
    whole file, and no more than ``declared`` (its size by the listing or the index) where known.

    Raises:
        StorageUnavailableError: The store kept failing past the deadline.
        StorageError: A final error (missing, refused, too large), naming the object.
    """
    key = storage.object_key(name)

    async def get() -> bytes:
        storage.traffic.request("GET")
        data: bytes = await storage.client.get(key, purpose="file", declared=declared)
        storage.traffic.received(len(data))
        return data

    try:
        async with storage._limit():
            return await call_with_retries(
                get, policy=storage.retry, classify=storage._classify, name=storage.location.name(key), counters=storage.counters
            )
    except StorageError:
        raise
    except Exception as error:
        raise StorageError(failure_line(storage.location.name(key), error)) from error


async def _build(storage: HostStorage, dataset: PeerDataset) -> PeerObjects:
    """The dataset's saved table, or one built from its files fetched whole."""
    table = dataset.saved(storage.url)
    if table is None:
        if dataset.format == "tfrecord" and dataset.fields is None and dataset.files:
            # the fields come from the first record: the first file is scanned before the rest
            first = await _scan(storage, dataset, 0)
            rest = await _scan_all(storage, dataset, range(1, len(dataset.files)))
            records = [first, *rest]
        else:
            records = await _scan_all(storage, dataset, range(len(dataset.files)))
        table = await asyncio.to_thread(dataset.build, records)
    return PeerObjects(storage, dataset, table)


async def _scan_all(storage: HostStorage, dataset: PeerDataset, numbers: range) -> list[Any]:
    gate = asyncio.Semaphore(_FILES_AT_ONCE)

    async def one(number: int) -> Any:
        async with gate:
            return await _scan(storage, dataset, number)

    return list(await asyncio.gather(*(one(number) for number in numbers)))


async def _scan(storage: HostStorage, dataset: PeerDataset, number: int) -> Any:
    file = dataset.files[number]
    name = storage.location.name(storage.object_key(file.name))
    stored = await fetch_whole(storage, file.name, file.stored_bytes)

    def scan() -> Any:
        return dataset.scan(number, dataset.raw(number, stored, name), name)

    return await asyncio.to_thread(scan)


async def open_indexed(
    storage: HostStorage, kind: str, index: bytes, listing: dict[str, dict[str, Any]], payload: str | None, label: str | None
) -> PeerObjects:
    """An MDS (``kind="mds"``) or LitData (``"litdata"``) dataset under the storage's prefix,
    from its ``index.json`` and the prefix's listing (name to size and ETag).

    Raises:
        StorageError: A shard ``index.json`` lists that is missing or of another size.
    """
    dataset = indexed_dataset(kind, index, storage.url, f"{storage.url}/index.json", payload, label)
    stamps = []
    for file in dataset.files:
        meta = listing.get(file.name)
        if meta is None:
            raise StorageError(f"{storage.location.name(storage.object_key(file.name))}: listed in index.json but not in the store")
        if file.stored_bytes is not None and int(meta["size"]) != file.stored_bytes:
            raise StorageError(
                f"{storage.location.name(storage.object_key(file.name))}: {meta['size']} bytes, index.json declares {file.stored_bytes} (truncated or rewritten?)"
            )
        stamps.append(meta.get("e_tag") or meta.get("last_modified"))
    dataset.stamp(stamps)
    return await _build(storage, dataset)


async def open_tfrecords(storage: HostStorage, listing: dict[str, dict[str, Any]], payload: str | None, label: str | None) -> PeerObjects:
    """The TFRecord files under the storage's prefix (from its listing), in name order."""
    names = sorted(listing)
    dataset = tfrecord_dataset([(name, int(listing[name]["size"])) for name in names], storage.url, payload, label, None)
    dataset.stamp([listing[name].get("e_tag") or listing[name].get("last_modified") for name in names])
    return await _build(storage, dataset)


async def open_hf(storage: HostStorage, listing: dict[str, dict[str, Any]], payload: str | None, label: str | None) -> PeerObjects:
    """A Hugging Face ``save_to_disk`` folder under the storage's prefix (its ``state.json``,
    ``dataset_info.json`` and Arrow files).

    Raises:
        StorageError: ``state.json`` cannot be read or lists a file that is not there.
    """
    state = await storage._get_small("state.json")
    if state is None:
        raise StorageError(f"{storage.url}/state.json: listed but cannot be read")
    info = await storage._get_small("dataset_info.json") if "dataset_info.json" in listing else None
    sizes = {name: int(meta["size"]) for name, meta in listing.items() if name.endswith(".arrow")}
    dataset = hf_dataset(state, info, sizes, storage.url, f"{storage.url}/state.json", payload, label)
    dataset.stamp([listing[file.name].get("e_tag") or listing[file.name].get("last_modified") for file in dataset.files])
    return await _build(storage, dataset)
