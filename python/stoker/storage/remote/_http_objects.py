"""A web server as an object store, behind `ObjectClient`: a key is a path under the server's
root, read by GET, ranged GET and HEAD through `stoker._bounded.HttpClient` (the client stoker
controls: the body policy, at most 5 redirects, the user's headers kept to their origin, an
overall deadline per request). A web server cannot be listed: `HTTPStorage` asks each named file
for its size by HEAD instead."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote

from ..._bounded import FailureKind, HttpClient, HttpSettings, classify_http_error
from ...errors import StorageError

__all__ = ["HttpObjects"]


class HttpObjects:
    """The files under ``base`` on one web server.

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
        return await self.client.stream(self.url(key), write, limit=limit, what=what)

    def failure_kind(self, error: BaseException) -> FailureKind:
        return classify_http_error(error)

    async def close(self) -> None:
        await self.client.close()
