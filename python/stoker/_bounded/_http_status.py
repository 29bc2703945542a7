"""What a server's answer means when it is not the data: its status as an error of stoker's
(`HttpStatusError`, with the reason phrase the server sent shown escaped), and how every failed
HTTP request is sorted for the retry policy (`classify_http_error`): a missing file or refused
credentials are final, a busy server is waited for, a lost connection, a timeout or a 5xx is
retried, and a verdict of the body policy (a `StorageError`: too large, a redirect refused, a
malformed response) is never retried as an outage.

What waiting does not change fails at once: a 4xx other than 408 and 429 (the server's answer to
this request, not a sign of load), a certificate that is not trusted, a failed TLS handshake and a
host name that does not resolve (`StorageUnreachableError`, named by the clients: `._tls`), and a
server that answers a ranged GET with the whole file (`RangesNotServedError`: its files are read
whole instead, by `HTTPStorage`). Outages (refused or lost connections, timeouts, 5xx) and
throttling (429, 503) are retried to the deadline.
"""

from __future__ import annotations

import http
import sys
from typing import Any, Literal

from ..errors import StorageError
from ._shown_text import shown

__all__ = [
    "FailureKind",
    "HttpMissingError",
    "HttpRefusedError",
    "HttpStatusError",
    "RangesNotServedError",
    "classify_http_error",
    "status_error",
    "status_error_of",
]

FailureKind = Literal["missing", "refused", "overload", "retry", "fatal"]


class HttpStatusError(OSError):
    """A server answered, but not with the data: its status (and the URL, shown without query),
    and the reason phrase it sent, shown (`shown`: it is the server's text).

    Attributes:
        url: The URL that answered (`shown_url`).
        status: The HTTP status.
        phrase: The reason phrase the server sent (raw; the message shows it escaped).
    """

    def __init__(self, url: str, status: int, phrase: str = "") -> None:
        try:
            words = http.HTTPStatus(status).phrase
        except ValueError:
            words = "an unknown status"
        super().__init__(f"{url}: HTTP {status} ({shown(phrase, 100) if phrase else words})")
        self.url, self.status, self.phrase = url, status, phrase

    def __reduce__(self) -> tuple[Any, ...]:  # the attributes kept across processes
        return (type(self), (self.url, self.status, self.phrase))

    @property
    def kind(self) -> FailureKind:
        """What the status means for a retry: ``"missing"`` (404, 410), ``"refused"`` (401, 403,
        407), ``"overload"`` (429, 503: the server asks for less), ``"retry"`` (other 5xx, 408)
        or ``"fatal"``."""
        if self.status in (404, 410):
            return "missing"
        if self.status in (401, 403, 407):
            return "refused"
        if self.status in (429, 503):
            return "overload"
        if self.status >= 500 or self.status == 408:
            return "retry"
        return "fatal"


class HttpMissingError(HttpStatusError, FileNotFoundError):
    """404 or 410: nothing at the URL."""


class HttpRefusedError(HttpStatusError, PermissionError):
    """401, 403 or 407: the server refuses (credentials missing or wrong)."""


class RangesNotServedError(StorageError):
    """A server answered a ranged GET with the whole file (status 200): it does not serve byte
    ranges (``python -m http.server`` does not). Never retried: `HTTPStorage` reads that
    server's files whole instead, each once.

    Attributes:
        url: The URL asked for (shown).
    """

    def __init__(self, url: str) -> None:
        super().__init__(f"{url}: answered a ranged GET with the whole file (status 200): the server does not serve byte ranges")
        self.url = url

    def __reduce__(self) -> tuple[Any, ...]:  # the attributes kept across processes
        return (type(self), (self.url,))


def status_error(url: str, response: Any) -> HttpStatusError:
    """The error for a response of status other than the one asked for (an aiohttp response)."""
    return status_error_of(url, response.status, response.reason or "")


def status_error_of(url: str, status: int, phrase: str = "") -> HttpStatusError:
    """The error for ``status`` at ``url``: `HttpMissingError`, `HttpRefusedError` or
    `HttpStatusError` as its kind says."""
    kind = HttpStatusError(url, status).kind
    if kind == "missing":
        return HttpMissingError(url, status, phrase)
    if kind == "refused":
        return HttpRefusedError(url, status, phrase)
    return HttpStatusError(url, status, phrase)


def classify_http_error(error: BaseException) -> FailureKind:
    """How a failed request is treated: a missing object or refused credentials are final, so are
    a malformed response (hostile or broken, not an outage), any other 4xx but 408 and 429, and
    what the clients name as unreachable (TLS, a name that does not resolve: a `StorageError`);
    a busy server is waited for; a lost connection, a timeout or a 5xx is retried."""
    if isinstance(error, StorageError):
        return "fatal"  # a verdict: too large, a redirect loop, an untrusted certificate...
    if isinstance(error, HttpStatusError):
        return error.kind
    loaded = sys.modules.get("asyncio")  # no asyncio error without asyncio
    if isinstance(error, (OSError, loaded.TimeoutError) if loaded is not None else OSError):  # refused, reset, cut short, too slow
        return "retry"
    return "fatal"
