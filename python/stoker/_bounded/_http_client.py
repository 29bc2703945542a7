"""The HTTP client stoker controls (aiohttp), under the body policy of `._http`: every plain web
server read (`HTTPStorage`) and every metrics page (`stoker top`) goes through `HttpClient`.

aiohttp, because stoker must own what the client of an object store hides: obstore (Rust's
object_store over reqwest) allocates a whole-object GET from its declared length (a
``Content-Length: 1000000000000`` aborts the process), follows 10 redirects and carries every
header but ``Authorization`` and ``Cookie`` to another host. Here redirects are followed by stoker
(``allow_redirects=False``), bodies are read in the pieces that arrive, and each request has one
deadline: aiohttp's ``total`` timeout covers connecting, the headers and the whole body, and each
hop gets what is left of the request's deadline.

TLS: certificates are verified always, against the system's roots (or ``SSL_CERT_FILE`` /
``SSL_CERT_DIR``, read when the session is made) and the settings' ``ca`` (``ca_bundle=``). A
certificate not trusted, a failed handshake and a host name that does not resolve are raised at
once as `StorageUnreachableError` naming the host and the cause (`._tls`); a server that answers
a ranged GET with the whole file as `RangesNotServedError` (read whole by `HTTPStorage`). The
settings (deadline, redirects) and the body policy are `._http`'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from ..errors import StorageError
from ._http import (
    BODY_LIMITS,
    REDIRECT_STATUSES,
    BoundedBody,
    HttpSettings,
    RedirectChain,
    purpose_words,
    refuse_declared,
    shown_url,
)
from ._http_status import RangesNotServedError, status_error
from ._shown_text import shown
from ._tls import handshake_failure, handshake_refused, name_does_not_resolve, name_failure, openssl_certificate_failure, ssl_context

if TYPE_CHECKING:  # asyncio is imported where a request is made: importing this module stays light
    import asyncio

__all__ = ["HttpClient", "HttpHead", "fetch_page"]

T = TypeVar("T")


@dataclass(frozen=True)
class HttpHead:
    """What a HEAD says of a file: its size (as the server declares it: a claim, checked against
    a purpose's limit before it sizes anything), ETag and time, and whether the server says it
    serves byte ranges (``Accept-Ranges: bytes``; one that does not say so may still)."""

    size: int
    e_tag: str | None
    last_modified: str | None
    accept_ranges: bool = False

    def as_listing(self) -> dict[str, Any]:
        """The listing entry object stores give (``size``, ``e_tag``, ``last_modified``), and
        ``accept_ranges``."""
        return {"size": self.size, "e_tag": self.e_tag, "last_modified": self.last_modified, "accept_ranges": self.accept_ranges}


class HttpClient:
    """GET, ranged GET, HEAD and streamed GET under the body policy, with the user's headers sent
    to the origin they named only.

    Its aiohttp session belongs to one event loop: the one ``loop()`` returns (a storage's own),
    where calls made on another loop are run; or, without ``loop``, the loop of its first call.
    The session is made and closed there and touched nowhere else.

    Args:
        headers: The user's headers (all secret: never logged, dropped on a redirect to another
            origin).
        settings: Timeouts, connections, redirects.
        loop: The event loop the client runs on, made on first need (None: the caller's).
    """

    def __init__(
        self,
        headers: Mapping[str, str] | None = None,
        settings: HttpSettings | None = None,
        loop: Callable[[], asyncio.AbstractEventLoop] | None = None,
    ) -> None:
        self._headers = dict(headers or {})
        self.settings = settings or HttpSettings()
        self._loop_of = loop
        self._session: Any = None
        self._closed = False
        # HTTP(S)_PROXY and NO_PROXY, as reqwest (obstore) honoured them; read here, not by
        # aiohttp's trust_env, which would also send ~/.netrc's credentials to a redirect's host.
        import urllib.request

        self._proxies = {scheme: url for scheme, url in urllib.request.getproxies().items() if scheme in ("http", "https")}

    # ---- the calls -------------------------------------------------------------------------

    async def get(self, url: str, *, purpose: str, declared: int | None = None) -> bytes:
        """The body at ``url``, whole, at most ``BODY_LIMITS[purpose]`` bytes (and at most
        ``declared`` where a listing or HEAD said its size).

        Raises:
            StorageError: Over the limit (declared or sent), a redirect refused, an encoded body.
            HttpStatusError: The server answered with another status (a `FileNotFoundError` for
                404, a `PermissionError` for 401 and 403).
            TimeoutError: No whole answer within the deadline.
            aiohttp.ClientError: The connection failed or the response was malformed.
        """
        limit = BODY_LIMITS[purpose] if declared is None else min(BODY_LIMITS[purpose], declared)

        async def body(response: Any, name: str) -> bytes:
            self._check_whole(response, name)
            return await self._body(response, name, limit, purpose)

        return await self._run(self._exchange("GET", url, {}, body))

    async def get_range(self, url: str, start: int, length: int, *, purpose: str) -> bytes:
        """Bytes ``start`` to ``start + length - 1`` at ``url``: a 206 answer with exactly that
        range. ``length`` is checked against the purpose's limit before it is asked for (it comes
        from an index: outside input too).

        Raises:
            RangesNotServedError: The server answered with the whole file (200: it does not
                serve ranges; nothing of the body is read).
            StorageError: ``length`` over the limit; a server that answers with another range.
            ConnectionError: Fewer bytes than asked (cut short: worth a retry).
            HttpStatusError, TimeoutError, aiohttp.ClientError: As `get`.
        """
        refuse_declared(length, BODY_LIMITS[purpose], shown_url(url), purpose_words(purpose))
        if length <= 0 or start < 0:
            raise StorageError(f"{shown_url(url)}: an empty or negative range ({start}, {length} bytes) asked for")
        headers = {"Range": f"bytes={start}-{start + length - 1}"}

        async def body(response: Any, name: str) -> bytes:
            if response.status == 200:  # its body is not read: the connection is closed instead
                raise RangesNotServedError(name)
            if response.status != 206:
                raise status_error(name, response)
            _check_encoding(response, name)
            expected = f"bytes {start}-{start + length - 1}/"
            if not response.headers.get("Content-Range", "").startswith(expected):
                raise StorageError(f"{name}: answered bytes {start}-{start + length - 1} with another range")
            data = await self._body(response, name, length, purpose)
            if len(data) != length:  # a response cut short: worth another try
                raise ConnectionError(f"{name}: got {len(data)} of {length} bytes")
            return data

        return await self._run(self._exchange("GET", url, headers, body))

    async def head(self, url: str) -> HttpHead:
        """The size, ETag and time the server gives for ``url``.

        Raises:
            StorageError: No or an invalid ``Content-Length``.
            HttpStatusError, TimeoutError, aiohttp.ClientError: As `get`.
        """

        async def answer(response: Any, name: str) -> HttpHead:
            if response.status != 200:
                raise status_error(name, response)
            text = response.headers.get("Content-Length", "")
            if not text.isdigit() or len(text) > 19:
                raise StorageError(f"{name}: the server gives no size (Content-Length) for it")
            ranges = "bytes" in response.headers.get("Accept-Ranges", "").lower()
            return HttpHead(int(text), response.headers.get("ETag"), response.headers.get("Last-Modified"), ranges)

        return await self._run(self._exchange("HEAD", url, {}, answer))

    async def stream(
        self, url: str, write: Callable[[bytes], Awaitable[None]], *, limit: int, what: str, timeout: float | None = None
    ) -> int:
        """The body at ``url`` handed to ``write`` piece by piece (never held whole), refused past
        ``limit`` bytes, within ``timeout`` seconds in all (default: the settings'; a whole file
        takes longer than a sample). Returns the bytes written.

        Raises:
            StorageError, HttpStatusError, TimeoutError, aiohttp.ClientError: As `get`.
        """

        async def body(response: Any, name: str) -> int:
            self._check_whole(response, name)
            refuse_declared(response.content_length, limit, name, what)
            written = 0
            async for chunk in response.content.iter_any():
                written += len(chunk)
                if written > limit:
                    raise StorageError(f"{name}: the server sent more than the {limit:,} bytes of {what}")
                await write(chunk)
            return written

        return await self._run(self._exchange("GET", url, {}, body, timeout))

    async def close(self) -> None:
        """Close the session (on its loop, where calls run). Idempotent."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    # ---- how ----------------------------------------------------------------------------

    async def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """``coroutine`` on the client's loop: here, or handed to it from another loop."""
        import asyncio

        if self._loop_of is None:
            return await coroutine
        loop = self._loop_of()
        if asyncio.get_running_loop() is loop:
            return await coroutine
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))

    def _session_here(self) -> Any:
        if self._closed:
            raise StorageError("the HTTP client was closed")
        if self._session is None:
            try:
                import aiohttp
            except ImportError as error:
                raise ImportError(
                    "reading over HTTP(S) needs aiohttp: pip install 'stoker[http]' (stoker top: 'stoker[metrics]')"
                ) from error

            self._session = aiohttp.ClientSession(
                connector=self._connector(),
                # Bodies as the server sent them: a range of an encoded body is not the file's,
                # and an inflated body would be sized by the inflater, not by the bytes received.
                auto_decompress=False,
                # A server's cookies are not kept nor sent on: the user's headers are the only
                # credentials, and they go to the origin the user named.
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,  # proxies: `_proxy_for`
                # A block of a few MB comes in fewer, larger pieces (a response holds at most
                # about twice this while its reader catches up).
                read_bufsize=1 << 20,
            )
        return self._session

    def _proxy_for(self, url: str) -> str | None:
        """The proxy a request to ``url`` goes through (None: straight to the server)."""
        if not self._proxies:
            return None
        import urllib.request

        parts = urlsplit(url)
        if urllib.request.proxy_bypass(parts.hostname or ""):
            return None
        return self._proxies.get(parts.scheme.lower())

    def _connector(self) -> Any:
        """The connection pool: TLS verified, against the roots of `ssl_context`."""
        import aiohttp

        return aiohttp.TCPConnector(limit=self.settings.max_connections, limit_per_host=0, ssl=ssl_context(self.settings.ca))

    async def _exchange(
        self, method: str, url: str, headers: Mapping[str, str], handle: Callable[[Any, str], Awaitable[T]], seconds: float | None = None
    ) -> T:
        """One request under the policy: redirects followed here, within one deadline
        (``seconds``, default the settings' timeout)."""
        import asyncio

        import aiohttp

        session = self._session_here()
        settings = self.settings
        loop = asyncio.get_running_loop()
        seconds = settings.timeout if seconds is None else seconds
        deadline = loop.time() + seconds
        chain: RedirectChain | None = None  # made at the first redirect: most requests have none
        here, asked = url, shown_url(url)
        while True:
            # Named by the URL asked for (the sample's), and where a redirect took it.
            name = asked if chain is None else f"{asked} (redirected to {shown_url(here)})"
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError(f"{name}: timed out: no whole answer within the {seconds:g} s deadline")
            mine = chain is None or chain.sends_user_headers
            sent = {**self._headers, **headers, "Accept-Encoding": "identity"} if mine else {**headers, "Accept-Encoding": "identity"}
            timeout = aiohttp.ClientTimeout(total=left, sock_connect=min(left, settings.connect_timeout))
            try:
                proxy = self._proxy_for(here)
                async with session.request(method, here, headers=sent, allow_redirects=False, timeout=timeout, proxy=proxy) as response:
                    if response.status in REDIRECT_STATUSES:
                        chain = chain or RedirectChain(url, settings.max_redirects)
                        here = chain.follow(response.headers.get("Location"), response.status)
                        continue
                    return await handle(response, name)
            # aiohttp's errors are named here, by the URL shown (theirs may carry a signed
            # URL's query), as the kinds `classify_http_error` sorts.
            except asyncio.TimeoutError:  # aiohttp's total (or connect) timeout
                raise TimeoutError(f"{name}: timed out: no whole answer within the {seconds:g} s deadline") from None
            except aiohttp.InvalidURL:
                raise StorageError(f"{name}: not a URL stoker can request") from None
            except aiohttp.ClientResponseError as error:  # the status line or headers do not parse
                raise StorageError(f"{name}: a malformed response ({_said(error.message)})") from None
            # What waiting does not change: raised at once, naming the host and the cause.
            except aiohttp.ClientConnectorCertificateError as error:
                raise openssl_certificate_failure(name, f"{error.host}:{error.port}", error.certificate_error) from None
            except aiohttp.ClientConnectorSSLError as error:
                if handshake_refused(error.os_error):
                    raise handshake_failure(name, f"{error.host}:{error.port}", _said(str(error.os_error))) from None
                raise ConnectionError(f"{name}: {type(error).__name__}: {_said(str(error))}") from None  # cut short: retried
            except aiohttp.ClientConnectorDNSError as error:
                if name_does_not_resolve(error.os_error):
                    raise name_failure(name, error.host, _said(str(error.os_error.strerror or error.os_error))) from None
                raise ConnectionError(f"{name}: {type(error).__name__}: {_said(str(error))}") from None  # the resolver: an outage
            except aiohttp.ClientError as error:  # refused, reset, cut short
                raise ConnectionError(f"{name}: {type(error).__name__}: {_said(str(error))}") from None

    @staticmethod
    def _check_whole(response: Any, name: str) -> None:
        if response.status != 200:
            raise status_error(name, response)
        _check_encoding(response, name)

    async def _body(self, response: Any, name: str, limit: int, purpose: str) -> bytes:
        """The body of a response whose status was checked, within ``limit``."""
        what = purpose_words(purpose)
        refuse_declared(response.content_length, limit, name, what)
        body = BoundedBody(limit, name, what)
        async for chunk in response.content.iter_any():
            body.add(chunk)
        return body.value()


def fetch_page(url: str, *, timeout: float) -> bytes:
    """The page at ``url`` (a metrics page), within ``timeout`` seconds in all and
    ``BODY_LIMITS["page"]`` bytes: for blocking code with no event loop running.

    Raises:
        OSError: Unreachable, an error status, a refused response (`StorageError`), or no whole
            answer within ``timeout`` (`TimeoutError`); the message names the URL.
    """

    import asyncio

    async def fetch() -> bytes:
        client = HttpClient(settings=HttpSettings(timeout=timeout, connect_timeout=timeout))
        try:
            return await client.get(url, purpose="page")
        finally:
            await client.close()

    return asyncio.run(fetch())


def _check_encoding(response: Any, name: str) -> None:
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise StorageError(f"{name}: the server sent the body {_said(encoding)}-encoded, though stoker asked for it as it is")


def _said(text: str) -> str:
    """What a server or its client library said: its first line, shown (`shown`: control
    characters escaped) and cut to 100 characters: text from outside, in a message."""
    return shown(text.strip().splitlines()[0] if text.strip() else "", 100)
