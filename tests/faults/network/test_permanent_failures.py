"""Failures that waiting does not change, against real servers on loopback that misbehave that
way, fail at once with one line naming the host and the cause: a 4xx other than 408 and 429 (and
S3's own throttling and RequestTimeout codes), a host name that does not resolve (a name under
``.invalid``), a TLS handshake with a server that speaks plain HTTP. Outages and throttling are
still retried, to the deadline. Each for the web servers' client (stoker's own) and the object
stores' (obstore), which name the same failures in different words."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker.errors import StorageError, StorageUnavailableError, StorageUnreachableError
from stoker.storage import AzureStorage, GCSStorage, HTTPStorage, S3Storage
from stoker.storage.policies import RetryPolicy
from stoker_testbed.availability import started
from stoker_testbed.servers.hostile_http import Answer, HostileHttpServer
from stoker_testbed.servers.http_server import StdlibFileServer
from stoker_testbed.servers.server import free_port

pytest.importorskip("obstore")

# Long enough that a failure retried as an outage could never pass for one raised at once: the
# outcome's type says which (`StorageUnavailableError` is what a retry ends in).
PATIENT = RetryPolicy(deadline=120, open_deadline=120)
BRIEF = RetryPolicy(deadline=1.0, open_deadline=1.0)
S3_KEYS = {"access_key_id": "test", "secret_access_key": "test-secret", "region": "us-east-1"}


@pytest.fixture
def server() -> Iterator[HostileHttpServer]:
    with HostileHttpServer() as hostile:
        hostile.files["data/shard-0.tar"] = bytes(10_240)
        yield hostile


def _opening(kind: str, server: HostileHttpServer, retry: RetryPolicy) -> Callable[[], Any]:
    """Opens a dataset whose first read is ``data/shard-0.tar`` on the web server, or
    ``bucket/data/dataset.json`` on S3 (the server's answers are the test's)."""
    if kind == "http":
        return lambda: HTTPStorage(server.url("data/shard-0.tar"), retry=retry)
    return lambda: S3Storage("s3://bucket/data", endpoint=server.home, retry=retry, **S3_KEYS)


def _script(kind: str, server: HostileHttpServer, answer: Answer) -> None:
    server.answer("data/shard-0.tar" if kind == "http" else "bucket/data/dataset.json", answer)


def _raised(call: Callable[[], Any]) -> BaseException:
    with pytest.raises(StorageError) as raised:
        call().close()
    return raised.value


def _s3_error(status: bytes, code: str) -> Answer:
    body = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>said\nover lines</Message></Error>".encode()
    return Answer(status, (("Content-Type", "application/xml"), ("Content-Length", str(len(body)))), body)


@pytest.mark.parametrize("kind", ["http", "s3"])
@pytest.mark.parametrize(("status", "code"), [(b"400 Bad Request", "InvalidArgument"), (b"405 Method Not Allowed", "MethodNotAllowed")])
def test_a_4xx_fails_at_once_in_one_line_naming_the_status(kind: str, status: bytes, code: str, server: HostileHttpServer) -> None:
    _script(kind, server, _s3_error(status, code))
    error = _raised(_opening(kind, server, PATIENT))
    assert not isinstance(error, StorageUnavailableError), f"retried as an outage: {error}"
    message = str(error)
    assert f"HTTP {status.split()[0].decode()}" in message and "\n" not in message, message
    assert server.home.split("//")[1] in message or "s3://bucket/data" in message, message
    if kind == "s3":
        assert code in message and "Debug source" not in message, message


_RETRIED = {
    "429": Answer(b"429 Too Many Requests"),
    "503": Answer(b"503 Service Unavailable"),
    "408": Answer(b"408 Request Timeout"),
    "400-RequestTimeout": _s3_error(b"400 Bad Request", "RequestTimeout"),  # S3's: the connection went quiet
    "503-SlowDown": _s3_error(b"503 Slow Down", "SlowDown"),
}


@pytest.mark.parametrize(
    ("kind", "answer"),
    [
        pytest.param(kind, _RETRIED[name], id=f"{kind}-{name}")
        for kind in ("http", "s3")
        for name in _RETRIED
        if kind == "s3" or "-" not in name
    ],
)
def test_throttling_and_outages_are_still_retried_to_the_deadline(kind: str, answer: Answer, server: HostileHttpServer) -> None:
    _script(kind, server, answer)
    error = _raised(_opening(kind, server, BRIEF))
    assert isinstance(error, StorageUnavailableError) and not isinstance(error, StorageUnreachableError), error
    assert "gave up after" in str(error), error


def test_a_refused_connection_is_an_outage_retried_to_the_deadline() -> None:
    error = _raised(lambda: HTTPStorage(f"http://127.0.0.1:{free_port()}/shard-0.tar", retry=BRIEF))
    assert isinstance(error, StorageUnavailableError) and not isinstance(error, StorageUnreachableError), error


_NOWHERE = "stoker-test.invalid"  # .invalid never resolves (RFC 2606)

_OPEN_NOWHERE: dict[str, Callable[[], Any]] = {
    "http": lambda: HTTPStorage(f"https://{_NOWHERE}/data/shard-{{0..2}}.tar", retry=PATIENT),
    "s3": lambda: S3Storage("s3://bucket/data", endpoint=f"http://{_NOWHERE}:9000", retry=PATIENT, **S3_KEYS),
    "gs": lambda: GCSStorage("gs://bucket/data", endpoint=f"http://{_NOWHERE}:4443", anonymous=True, retry=PATIENT),
    "az": lambda: AzureStorage(
        "az://container/data",
        endpoint=f"http://{_NOWHERE}:10000/devstoreaccount1",
        account="devstoreaccount1",
        anonymous=True,
        retry=PATIENT,
    ),
}


@pytest.mark.parametrize("store", sorted(_OPEN_NOWHERE))
def test_a_host_name_that_does_not_resolve_fails_at_once_naming_it(store: str) -> None:
    error = _raised(_OPEN_NOWHERE[store])
    assert isinstance(error, StorageUnreachableError), f"not named as unreachable at once: {error!r}"
    message = str(error)
    assert f"the host name {_NOWHERE} does not resolve" in message and "\n" not in message, message
    assert error.store == _NOWHERE and "Debug source" not in message


@pytest.mark.parametrize("kind", ["http", "s3"])
def test_tls_to_a_server_that_speaks_plain_http_fails_at_once_naming_it(kind: str, tmp_path: Path) -> None:
    plain = started(StdlibFileServer(tmp_path), "python -m http.server")
    try:
        error = _raised(_opening_https(kind, f"{plain.host}:{plain.port}"))
    finally:
        plain.close()
    assert isinstance(error, StorageUnreachableError), f"not named as unreachable at once: {error!r}"
    message = str(error)
    assert f"the TLS handshake with {plain.host}:{plain.port} failed" in message and "plain http://" in message, message
    assert "\n" not in message and "Debug source" not in message, message


def _opening_https(kind: str, host: str) -> Callable[[], Any]:
    if kind == "http":
        return lambda: HTTPStorage(f"https://{host}/data/shard-0.tar", retry=PATIENT)
    return lambda: S3Storage("s3://bucket/data", endpoint=f"https://{host}", retry=PATIENT, **S3_KEYS)
