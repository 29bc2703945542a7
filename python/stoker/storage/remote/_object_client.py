"""What `ObjectStorage` asks of a store's client, in one small protocol: a whole GET within a
purpose's limit, a ranged GET, a HEAD, a listing, a streamed download. Every network read of an
object store or a web server goes through it, so the body policy of `stoker._bounded` applies to
all of them and no caller touches a client library.

`ObstoreObjects` is the object stores' (S3, GCS, Azure: obstore, Rust's object_store). What it
does not do with obstore is allocate from a server's claim: obstore's ``GetResult.bytes()``
pre-allocates the length a response declares (``Content-Length: 1000000000000`` aborts the
process), so a whole GET is streamed into a bounded buffer instead, after its declared length is
checked against the purpose's limit. A ranged GET (``get_range``) is left to obstore: it sizes its
buffer by the range asked for (checked here first: it comes from an index, outside input too) and
refuses an answer with another range. What waiting does not change is named in one line as it
is raised (`object_store_failure`: an untrusted certificate, a host name that does not resolve,
a 4xx), never obstore's debug dump. `HttpObjects` (``_http.py``, beside `HTTPStorage`) is the web
servers'.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Protocol

from ..._bounded import BODY_LIMITS, BoundedBody, FailureKind, HttpStatusError, purpose_words, refuse_declared
from ...errors import StorageError
from ..policies import ErrorKind
from ._s3_client import classify_object_store_error, object_store_failure

__all__ = ["ObjectClient", "ObstoreObjects", "retry_kind"]

# Pieces a streamed body is read in: a sample of up to this size comes in one piece (no join).
_PIECE_BYTES = 8 << 20


class ObjectClient(Protocol):
    """One store's client, as `ObjectStorage` uses it. Keys are full object keys; errors name
    the object as ``name_of(key)`` does.

    Methods raise the client's own errors; `failure_kind` sorts them.
    """

    async def get(self, key: str, *, purpose: str, declared: int | None = None) -> bytes:
        """Object ``key`` whole: at most ``BODY_LIMITS[purpose]`` bytes, and at most ``declared``
        where a listing said its size (refused past either, before or while it is read)."""
        ...

    async def get_range(self, key: str, start: int, length: int, *, purpose: str) -> Any:
        """``length`` bytes from ``start`` (a bytes-like object), the length checked first."""
        ...

    async def head(self, key: str) -> dict[str, Any]:
        """Its listing entry: ``size`` (declared), ``e_tag``, ``last_modified``."""
        ...

    def list(self, prefix: str | None) -> AsyncIterator[list[dict[str, Any]]]:
        """The listing under ``prefix``, a page (one request) at a time: entries with ``path``,
        ``size``, ``e_tag``, ``last_modified``."""
        ...

    async def download(self, key: str, write: Callable[[bytes], Awaitable[None]], *, limit: int, what: str) -> int:
        """Object ``key`` handed to ``write`` piece by piece, refused past ``limit`` bytes;
        returns the bytes written."""
        ...

    def failure_kind(self, error: BaseException) -> FailureKind:
        """``"missing"``, ``"refused"``, ``"overload"``, ``"retry"`` or ``"fatal"``."""
        ...

    async def close(self) -> None:
        """Release connections (on the event loop the client ran on)."""
        ...


def retry_kind(kind: FailureKind) -> ErrorKind:
    """A failure kind as `call_with_retries` takes it: a missing object and refused credentials
    are final."""
    if kind == "missing" or kind == "refused":
        return "fatal"
    return kind


class ObstoreObjects:
    """An obstore store (S3Store, GCSStore, AzureStore) behind `ObjectClient`.

    Immutable after construction; obstore's store is safe to share between threads and loops.

    Args:
        store: The obstore store.
        name_of: How an object is named in messages (``s3://bucket/key``; never credentials).
    """

    def __init__(self, store: Any, name_of: Callable[[str], str]) -> None:
        self.store = store
        self.name_of = name_of

    async def get(self, key: str, *, purpose: str, declared: int | None = None) -> bytes:
        import obstore

        limit = BODY_LIMITS[purpose] if declared is None else min(BODY_LIMITS[purpose], declared)
        name, what = self.name_of(key), purpose_words(purpose)
        with _named(name):
            result = await obstore.get_async(self.store, key)
            start, end = result.range  # the length the response declares: checked, never allocated
            refuse_declared(end - start, limit, name, what)
            body = BoundedBody(limit, name, what)
            async for piece in result.stream(min_chunk_size=_PIECE_BYTES):
                body.add(piece)
                if body.size == end - start:  # all it declared (the client checks it sent no more)
                    break
        return body.value()

    async def get_range(self, key: str, start: int, length: int, *, purpose: str) -> Any:
        import obstore

        name = self.name_of(key)
        refuse_declared(length, BODY_LIMITS[purpose], f"{name} bytes {start}-{start + length - 1}", purpose_words(purpose))
        # obstore sizes its buffer by the range asked for, and refuses an answer of another range.
        with _named(name):
            data = await obstore.get_range_async(self.store, key, start=start, length=length)
        if len(data) != length:  # a response cut short: worth another try
            raise ConnectionError(f"got {len(data)} of {length} bytes")
        return data

    async def head(self, key: str) -> dict[str, Any]:
        import obstore

        with _named(self.name_of(key)):
            return dict(await obstore.head_async(self.store, key))

    async def list(self, prefix: str | None) -> AsyncIterator[list[dict[str, Any]]]:
        import obstore

        with _named(self.name_of(prefix or "")):
            async for page in obstore.list(self.store, prefix or None, chunk_size=1000):
                yield [dict(entry) for entry in page]

    async def download(self, key: str, write: Callable[[bytes], Awaitable[None]], *, limit: int, what: str) -> int:
        import obstore

        name = self.name_of(key)
        written = 0
        with _named(name):
            result = await obstore.get_async(self.store, key)
            start, end = result.range
            refuse_declared(end - start, limit, name, what)
            async for piece in result.stream(min_chunk_size=4 << 20):
                written += len(piece)
                if written > limit:
                    raise StorageError(f"{name}: the server sent more than the {limit:,} bytes of {what}")
                await write(piece)
        return written

    def failure_kind(self, error: BaseException) -> FailureKind:
        from obstore import exceptions

        if isinstance(error, HttpStatusError):  # a 4xx `_named` named
            return error.kind
        if isinstance(error, (FileNotFoundError, exceptions.NotFoundError)):
            return "missing"
        if isinstance(error, (exceptions.PermissionDeniedError, exceptions.UnauthenticatedError)):
            return "refused"
        return classify_object_store_error(error)

    async def close(self) -> None:
        return None  # obstore's connections are its runtime's


@contextlib.contextmanager
def _named(name: str) -> Iterator[None]:
    """Raises what obstore raised within it as `object_store_failure` names it, where it does
    (one line, without obstore's debug dump: ``from None``); anything else as it is."""
    try:
        yield
    except Exception as error:
        named = object_store_failure(error, name)
        if named is error:
            raise
        raise named from None
