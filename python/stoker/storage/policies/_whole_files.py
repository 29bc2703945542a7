"""Files of a server that does not serve byte ranges: each fetched whole once, kept on local disk,
and every read of it a slice of that copy.

A web server that answers a ranged GET with the whole file (``python -m http.server`` does) cannot
give a sample's bytes alone, and asking again does not change that. `WholeFiles` then fetches
each file whole, once: the requests that need it meanwhile wait for that one fetch, and later
epochs (and later runs on the machine) read the copy, named by the file's URL, size, ETag and
time, so a file changed on the server is fetched again. A file over the body policy's whole-file
limit (``BODY_LIMITS["file"]``, 4 GiB), or one the local disk has no room for, is refused by name;
a fetch that fails is retried by the caller's `RetryPolicy` like any read.

Until a server has answered one ranged GET, the reads wait for that first answer (`question`): a
server that answers with whole files gets one such request, not one per sample in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import shutil
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ..._bounded import BODY_LIMITS, shown_logger, size_words
from ...errors import StorageError

__all__ = ["WholeFiles"]

_logger = shown_logger("stoker.storage")

Fetch = Callable[[Path, int], Awaitable[None]]
"""Writes a file, whole, to a path (within the size its HEAD declared): one attempt."""


class WholeFiles:
    """The local copies of one server's files, for when it does not serve byte ranges (see the
    module notes). Shared by a storage's clients and event loops: its tables are behind a lock,
    and a file's one fetch is a `concurrent.futures.Future` any loop may wait on.

    Args:
        folder: Where the copies are kept (``$STOKER_CACHE/http-files``).
        server: The server, for the warning (``http://host:port``).
        limit: The largest file fetched whole.
    """

    def __init__(self, folder: Path, server: str, *, limit: int = BODY_LIMITS["file"]) -> None:
        self.folder = folder
        self.server = server
        self.limit = limit
        self.serves_ranges = True  # until a ranged GET is answered with the whole file
        self.fetched = 0  # files fetched whole by this process
        self._lock = threading.Lock()
        self._answered = False  # a ranged GET was answered (or failed): no read waits any more
        self._first: concurrent.futures.Future[None] | None = None  # the first ranged GET, under way
        self._copies: dict[str, Path] = {}
        self._fetches: dict[str, concurrent.futures.Future[Path]] = {}

    def local(self, key: str) -> bool:
        """Whether reads of ``key`` are slices of a local copy: the server serves no ranges, or a
        copy of the file is kept already (`adopt`)."""
        with self._lock:
            return not self.serves_ranges or key in self._copies

    @contextlib.asynccontextmanager
    async def question(self) -> AsyncIterator[None]:
        """Around a ranged GET to the server: the first is sent alone, and the others wait until it
        is answered (with its range, the whole file, or an error), then go as they come."""
        if self._answered:
            yield
            return
        with self._lock:
            first = self._first
            mine = first is None
            if first is None:
                first = self._first = concurrent.futures.Future()
        if not mine:
            await asyncio.wrap_future(first)
            yield
            return
        try:
            yield
        finally:
            self._answered = True
            first.set_result(None)

    def ranges_served(self) -> None:
        """The server answered a ranged GET with its range: no read waits for a first answer."""
        self._answered = True

    def no_ranges(self) -> None:
        """The server answered a ranged GET with the whole file: every file is read whole from now
        on. The first call says so, once."""
        with self._lock:
            self._answered = True
            first, self.serves_ranges = self.serves_ranges, False
        if first:
            _logger.warning(
                "%s does not serve byte ranges (it answered a ranged GET with the whole file, as python -m http.server does): "
                "each file is fetched whole once and read from a local copy in %s (files over %s refused); "
                "a server that serves ranges (nginx, Caddy, a CDN, an object store) sends only the bytes each sample needs",
                self.server,
                self.folder,
                size_words(self.limit),
            )

    def copy_path(self, url: str, meta: Mapping[str, Any]) -> Path:
        """Where the copy of the file at ``url`` (with its listing entry ``meta``: size, ETag,
        time) is kept."""
        stamp = f"{url}\n{meta.get('size')}\n{meta.get('e_tag')}\n{meta.get('last_modified')}"
        return self.folder / (hashlib.sha256(stamp.encode()).hexdigest()[:32] + PurePosixPath(url).suffix[:16])

    def adopt(self, key: str, fetched: Path, url: str, meta: Mapping[str, Any]) -> None:
        """Keep ``fetched``, the whole file ``key`` fetched for another purpose (to index it), as
        its copy: moved into place, not fetched again."""
        target = self.copy_path(url, meta)
        shutil.move(fetched, target)
        with self._lock:
            self._copies[key] = target

    async def read(self, key: str, start: int, length: int, *, url: str, meta: Mapping[str, Any], fetch: Fetch) -> bytes:
        """Bytes ``start`` to ``start + length - 1`` of file ``key``, from its copy, fetched now
        (``fetch``) if there is none: one fetch per file, however many reads wait for it.

        Raises:
            StorageError: The file is over the limit, the disk has no room for it, or the range is
                past its end; names ``url``.
            ConnectionError: The copy went missing (fetched again on the caller's retry).
            Exception: What ``fetch`` raised (the caller's retry policy sorts it).
        """
        path = await self._copy(key, url, meta, fetch)
        return await asyncio.to_thread(self._slice, key, path, start, length, url)

    async def _copy(self, key: str, url: str, meta: Mapping[str, Any], fetch: Fetch) -> Path:
        with self._lock:
            path = self._copies.get(key)
            if path is not None:
                return path
            pending = self._fetches.get(key)
            mine = pending is None
            if pending is None:
                pending = self._fetches[key] = concurrent.futures.Future()
        if not mine:
            return await asyncio.wrap_future(pending)
        try:
            path = await self._fetched(url, meta, fetch)
        except BaseException as error:
            with self._lock:
                del self._fetches[key]
            # Those waiting try again (their retry fetches it anew): a cancelled fetch is not theirs.
            pending.set_exception(error if isinstance(error, Exception) else ConnectionError(f"{url}: its fetch was cancelled"))
            raise
        with self._lock:
            self._copies[key] = path
            del self._fetches[key]
        pending.set_result(path)
        return path

    async def _fetched(self, url: str, meta: Mapping[str, Any], fetch: Fetch) -> Path:
        size = int(meta["size"])
        if size > self.limit:
            raise StorageError(
                f"{url}: the server does not serve byte ranges, and this file is {size:,} bytes, over the {size_words(self.limit)} "
                "stoker fetches whole; serve it from a server that takes Range requests (nginx, Caddy, a CDN, an object store)"
            )
        target = self.copy_path(url, meta)
        if await asyncio.to_thread(_whole_at, target, size):  # an earlier run's copy
            return target
        free = shutil.disk_usage(self.folder).free
        if size > free:  # checked before a byte is fetched: the size is the server's claim
            raise StorageError(
                f"{url}: the server does not serve byte ranges, so the file is kept whole on local disk: {size:,} bytes, "
                f"and {self.folder} has {free:,} free (point STOKER_CACHE at a larger disk)"
            )
        scratch = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.part")
        try:
            await fetch(scratch, size)
            got = scratch.stat().st_size
            if got != size:  # cut short: worth another try
                raise ConnectionError(f"{url}: got {got:,} of {size:,} bytes")
            os.replace(scratch, target)
        finally:
            scratch.unlink(missing_ok=True)
        with self._lock:  # fetches of different files end on different loops' threads at once
            self.fetched += 1
        return target

    def _slice(self, key: str, path: Path, start: int, length: int, url: str) -> bytes:
        try:
            with open(path, "rb") as file:
                data = os.pread(file.fileno(), length, start)
        except FileNotFoundError:  # removed under the run (a cache cleaned): fetched again
            with self._lock:
                self._copies.pop(key, None)
            raise ConnectionError(f"{url}: its local copy {path} went missing") from None
        if len(data) != length:
            raise StorageError(f"{url}: bytes {start:,}-{start + length - 1:,} asked for, and the file ends before")
        return data


def _whole_at(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except FileNotFoundError:
        return False
