"""HTTP responses as outside input: the one body policy every network read stoker makes follows
(object stores, web servers, metrics pages).

A response's status, headers and length are the server's claims. Any server, CDN or
man-in-the-middle on ``http://`` makes them, so none of them sizes anything here:

- a body is gathered in the pieces that arrive, into a buffer that grows with them, up to the
  limit of what it is read for (`BODY_LIMITS`); a declared ``Content-Length`` over that limit is
  refused before a byte is read, and one under it is never used to allocate;
- at most `MAX_REDIRECTS` redirects, and a loop is named at its first repeat;
- on a redirect to another origin (scheme, host, port) every header the user supplied (all of
  ``headers=`` counts as secret) and any credentials are dropped for the rest of the request; a
  redirect from ``https`` to ``http``, to another scheme, or to a URL carrying credentials is
  refused;
- every request has an overall deadline across its redirects and its body (the client,
  `stoker._bounded.HttpClient`), not only an idle timeout;
- a URL is named without credentials, query or fragment (`shown_url`): a redirect's target may
  be a signed URL.

A refusal is a `StorageError` naming the URL and why: a verdict, never retried as an outage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal
from urllib.parse import urljoin, urlsplit

from ..errors import ConfigurationError, StorageError
from ._json import MAX_MANIFEST_BYTES
from ._shown_text import shown

__all__ = [
    "BODY_LIMITS",
    "MAX_REDIRECTS",
    "REDIRECT_STATUSES",
    "BoundedBody",
    "HttpSettings",
    "Purpose",
    "RedirectChain",
    "origin",
    "purpose_words",
    "refuse_declared",
    "shown_url",
    "size_words",
]

Purpose = Literal["page", "metadata", "sample", "file"]
"""What a body is read for; each has its limit in `BODY_LIMITS`."""

BODY_LIMITS: Mapping[str, int] = MappingProxyType(
    {
        # A metrics page: a loader's is a few KB; a wrong URL must not fill the memory.
        "page": 4 << 20,
        # A manifest, an index or its sidecar, a dataset's state or info file: the largest JSON
        # document stoker reads (each reader then holds its own to its own bound).
        "metadata": MAX_MANIFEST_BYTES,
        # One sample, or a block of consecutive samples, by one GET.
        "sample": 2 << 30,
        # A whole data file held in memory (a peer's compressed shard), or a part of a Parquet file.
        "file": 4 << 30,
    }
)
"""The most bytes a body read for each `Purpose` may have (immutable)."""

_WORDS = {"page": "a page", "metadata": "metadata", "sample": "a sample or a block", "file": "a whole file"}

MAX_REDIRECTS = 5
"""Redirects one request follows at most (browsers follow 20, reqwest 10: a dataset's file is
moved once or twice, by a CDN or a signed URL)."""

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

_DEFAULT_PORTS = {"http": 80, "https": 443}

_URL_LIMIT = 2000  # characters of a URL shown: any real one, whole (messages name files by it)
# A URL that `shown_url` would give back as it is: lower-case scheme and host, a port without a
# leading zero, a path of printable ASCII; no credentials, query or fragment.
_PLAIN_URL = re.compile(r"https?://[a-z0-9.\-]+(?::[1-9][0-9]{0,3})?(?:/[!$&'()*+,\-./0-9:;=@A-Z_a-z~%]*)?")


def shown_url(url: str) -> str:
    """``url`` as stoker names it to a person: scheme, host, port and path, shown (`shown`: a
    redirect's target is the server's text); never credentials, a query or a fragment (a signed
    URL's signature, a token)."""
    if len(url) < _URL_LIMIT and _PLAIN_URL.fullmatch(url):  # every request names one: the common case, fast
        return url
    return _parsed_shown_url(url)


def _parsed_shown_url(url: str) -> str:
    """`shown_url` the long way: parsed, rebuilt and shown."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # not even a URL: its scheme and nothing the server chose beyond it
        return shown(url.split(":", 1)[0], 16) + ":<not a URL>"
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return shown(f"{parts.scheme}://{netloc}{parts.path}", _URL_LIMIT)


def origin(url: str) -> tuple[str, str, int | None]:
    """``url``'s origin: scheme, host (lower case) and port (the scheme's default when none)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


def size_words(size: int) -> str:
    """``size`` bytes in words: ``"4 MiB"``, ``"2 GiB"``, else ``"1,234 bytes"``."""
    for shift, unit in ((30, "GiB"), (20, "MiB")):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size:,} bytes"


def purpose_words(purpose: str) -> str:
    """What a body of ``purpose`` is, in words, for messages."""
    return _WORDS.get(purpose, purpose)


def refuse_declared(declared: int | None, limit: int, name: str, what: str) -> None:
    """Refuse a size the server declared (``Content-Length``, a listing's or a HEAD's size, an
    index's range) before it sizes anything: over ``limit``, or negative.

    Raises:
        StorageError: Names ``name``, the size, the limit and ``what`` the body is.
    """
    if declared is None:
        return
    if declared < 0:
        raise StorageError(f"{name}: the server declares a size of {declared:,} bytes")
    if declared > limit:
        raise StorageError(f"{name}: the server declares {declared:,} bytes, over the {limit:,} bytes stoker reads as {what}")


@dataclass(frozen=True)
class HttpSettings:
    """How one `HttpClient` talks to servers.

    Attributes:
        timeout: Seconds one request may take in all: connecting, every redirect, and the whole
            body. A server that trickles its answer ends there.
        connect_timeout: Seconds to open a connection.
        max_connections: Connections open at once (the pool's size).
        max_redirects: Redirects one request follows at most.
        ca: PEM certificates trusted besides the system's (``ca_bundle=``, read by
            `stoker._bounded.ca_certificates`); certificates are verified whatever it is.
    """

    timeout: float = 30.0
    connect_timeout: float = 5.0
    max_connections: int = 256
    max_redirects: int = MAX_REDIRECTS
    ca: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not (self.timeout > 0 and self.connect_timeout > 0 and self.max_connections >= 1 and 0 <= self.max_redirects <= MAX_REDIRECTS):
            raise ConfigurationError(f"invalid HTTP settings {self} (positive timeouts and connections, at most {MAX_REDIRECTS} redirects)")


class BoundedBody:
    """A response body gathered as it arrives, refused past ``limit``: its memory grows with the
    bytes received, never with what the server declared. Owned by the one task reading it.

    Args:
        limit: The most bytes it may have.
        name: The URL (shown) or object, for the refusal.
        what: What the body is, in words (``"metadata"``).
    """

    __slots__ = ("_chunks", "limit", "name", "size", "what")

    def __init__(self, limit: int, name: str, what: str) -> None:
        self.limit, self.name, self.what = limit, name, what
        self._chunks: list[bytes] = []
        self.size = 0

    def add(self, chunk: bytes) -> None:
        """One more piece of the body.

        Raises:
            StorageError: The body is now over its limit (nothing more is read).
        """
        self.size += len(chunk)
        if self.size > self.limit:
            self._chunks.clear()
            raise StorageError(
                f"{self.name}: over {size_words(self.limit)}: the server sent more than the {self.limit:,} bytes stoker reads as {self.what}"
            )
        if chunk:
            self._chunks.append(chunk)

    def value(self) -> bytes:
        """The body (its only piece as it came, or the pieces joined once)."""
        if len(self._chunks) == 1:
            return self._chunks[0]
        return b"".join(self._chunks)


class RedirectChain:
    """Where one request is, across its redirects: its URL now, the URLs it visited, and whether
    the user's headers may still be sent (only while every hop stayed on the origin the user
    named). Owned by the one task making the request.

    Args:
        url: The URL the user named (or stoker built from it).
        max_redirects: Redirects followed at most.
    """

    __slots__ = ("_visited", "home", "left_home", "max_redirects", "url")

    def __init__(self, url: str, max_redirects: int = MAX_REDIRECTS) -> None:
        self.url = url
        self.home = origin(url)
        self.left_home = False
        self.max_redirects = max_redirects
        self._visited = [url]

    @property
    def sends_user_headers(self) -> bool:
        """Whether the user's headers go with the next hop: never once a hop left their origin."""
        return not self.left_home

    @property
    def redirects(self) -> int:
        """Redirects followed so far."""
        return len(self._visited) - 1

    def follow(self, location: str | None, status: int) -> str:
        """The next hop for a redirect (``status``) to ``location``; the chain moves there.

        Raises:
            StorageError: No or an invalid ``Location``, a loop, more than ``max_redirects``
                redirects, a redirect to another scheme than http(s), from https to http, or to a
                URL carrying credentials. Each names the URLs without their queries.
        """
        here = shown_url(self._visited[0])
        if self.redirects:
            here += f" (redirected to {shown_url(self.url)})"
        if not location:
            raise StorageError(f"{here}: a redirect ({status}) without a Location")
        try:
            target = urljoin(self.url, location.strip())
            parts = urlsplit(target)
            parts.port  # noqa: B018 (raises ValueError on a port that is not a number)
        except ValueError:
            raise StorageError(f"{here}: a redirect ({status}) to something that is not a URL") from None
        target = parts._replace(fragment="").geturl()
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise StorageError(f"{here}: a redirect ({status}) to a {scheme or 'scheme-less'}: URL; stoker follows http(s) only")
        if scheme == "http" and urlsplit(self.url).scheme.lower() == "https":
            raise StorageError(f"{here}: a redirect ({status}) from https to http ({shown_url(target)}); stoker does not leave TLS")
        if parts.username is not None or parts.password is not None:
            raise StorageError(f"{here}: a redirect ({status}) to a URL with credentials in it ({shown_url(target)})")
        if target in self._visited:
            chain = " -> ".join(shown_url(url) for url in [*self._visited[self._visited.index(target) :], target])
            raise StorageError(f"{shown_url(self._visited[0])}: a redirect loop ({chain})")
        if self.redirects >= self.max_redirects:
            raise StorageError(f"{shown_url(self._visited[0])}: more than {self.max_redirects} redirects (the last to {shown_url(target)})")
        self._visited.append(target)
        self.url = target
        if origin(target) != self.home:
            self.left_home = True
        return target
