"""TLS as users have it: a server whose certificate a private CA signed (a corporate proxy's, an
on-premise MinIO's), on loopback, for the web servers' client and every object store's. Not
trusted by default, it fails at once naming the host and the reason; trusted by ``ca_bundle=``,
by ``SSL_CERT_FILE`` or ``SSL_CERT_DIR``, or by the store's SDK setting (``AWS_CA_BUNDLE``,
``REQUESTS_CA_BUNDLE``...), the whole dataset reads. Certificates are verified always."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from stoker.errors import ConfigurationError, StorageUnreachableError
from stoker.storage import HTTPStorage, open_storage
from stoker.storage.policies import RetryPolicy
from stoker_testbed.availability import started
from stoker_testbed.data.datasets import dataset
from stoker_testbed.servers.buckets import TestBucket, new_bucket
from stoker_testbed.servers.gcs_server import GcsServer
from stoker_testbed.servers.http_server import HttpFileServer
from stoker_testbed.servers.latency_proxy import LatencyProxy
from stoker_testbed.servers.server import free_port
from stoker_testbed.servers.tls import PrivateCa

pytest.importorskip("cryptography", reason="the private CA is made with cryptography")

# Long enough that a failure retried as an outage could never pass for one raised at once.
PATIENT = RetryPolicy(deadline=120, open_deadline=120)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCa:
    return PrivateCa(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def samples() -> dict[str, bytes]:
    source = dataset(12)
    return dict(zip(source.keys, source.read_many(source.keys)))


@pytest.fixture(scope="module")
def https_files(ca: PrivateCa, samples: dict[str, bytes]) -> Iterator[str]:
    """The samples as files on a web server behind TLS with the CA's certificate: their URL list."""
    server = started(HttpFileServer(), "the HTTP test server (aiohttp)")
    try:
        for key, data in samples.items():
            server.put(key, data)
        with LatencyProxy(server.host, server.port, tls=ca.server_context()) as proxy:
            base = f"https://127.0.0.1:{proxy.address[1]}"
            yield "::".join(f"{base}/{key}" for key in sorted(samples))
    finally:
        server.close()


def _read_all(storage: Any) -> dict[str, bytes]:
    """Every sample's bytes, by its file name (a URL list names samples by file, a bucket by path)."""
    with storage:
        return {key.rsplit("/", 1)[-1]: data for key, data in zip(storage.keys, storage.read_many(list(storage.keys)))}


def _by_name(samples: dict[str, bytes]) -> dict[str, bytes]:
    return {key.rsplit("/", 1)[-1]: data for key, data in samples.items()}


def _host_of(urls: str) -> str:
    parts = urlsplit(urls.split("::")[0])
    return f"{parts.hostname}:{parts.port}"


def test_an_untrusted_certificate_fails_at_once_naming_the_host_and_the_reason(https_files: str) -> None:
    with pytest.raises(StorageUnreachableError) as refused:
        HTTPStorage(https_files, retry=PATIENT)
    message = str(refused.value)
    assert f"the TLS certificate of {_host_of(https_files)} is not trusted (unable to get local issuer certificate)" in message, message
    assert "ca_bundle=" in message and "\n" not in message, message


def test_ca_bundle_trusts_the_private_ca(https_files: str, ca: PrivateCa, samples: dict[str, bytes]) -> None:
    assert _read_all(open_storage(https_files, ca_bundle=ca.ca_file)) == _by_name(samples)


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_ssl_cert_file_and_dir_are_honoured(
    variable: str, https_files: str, ca: PrivateCa, samples: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set after aiohttp was imported (by the tests before): read when the storage's client is made.
    monkeypatch.setenv(variable, str(ca.ca_file if variable == "SSL_CERT_FILE" else ca.hashed_folder(tmp_path / "certs")))
    assert _read_all(HTTPStorage(https_files)) == _by_name(samples)


def test_a_ca_bundle_that_holds_no_certificate_is_named(https_files: str, tmp_path: Path) -> None:
    (tmp_path / "not-a-ca.pem").write_text("-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n")
    for path, why in ((tmp_path / "not-a-ca.pem", "no certificate in it"), (tmp_path / "missing.pem", "no such file")):
        with pytest.raises(ConfigurationError, match=why) as refused:
            HTTPStorage(https_files, ca_bundle=path)
        assert f"ca_bundle='{path}'" in str(refused.value)


# ---- object stores: the same CA in front of each test server ---------------------------------

# Each store's SDK setting for a CA bundle, as its own tools read it.
SDK_VARIABLE = {"s3": "AWS_CA_BUNDLE", "gs": "REQUESTS_CA_BUNDLE", "az": "REQUESTS_CA_BUNDLE"}


@pytest.fixture
def tls_bucket(object_bucket: TestBucket, ca: PrivateCa, samples: dict[str, bytes]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The samples as objects in a fresh bucket, and the store's options through a TLS proxy with
    the CA's certificate in front of its server."""
    if object_bucket.store == "gs":
        # fake-gcs-server routes requests by the host its clients name: one of its own, told the proxy's.
        port = free_port()
        with LatencyProxy("127.0.0.1", port, tls=ca.server_context()) as proxy:
            server = started(GcsServer(port, public_host=f"127.0.0.1:{proxy.address[1]}"), "the GCS test server (fake-gcs-server)")
            try:
                yield _filled(new_bucket("gs", server), samples, f"https://127.0.0.1:{proxy.address[1]}")
            finally:
                server.close()
        return
    plain = urlsplit(str(object_bucket.options()["endpoint"]))
    with LatencyProxy(plain.hostname or "127.0.0.1", plain.port or 80, tls=ca.server_context()) as proxy:
        yield _filled(object_bucket, samples, f"https://127.0.0.1:{proxy.address[1]}{plain.path}")


def _filled(bucket: TestBucket, samples: dict[str, bytes], endpoint: str) -> tuple[str, dict[str, Any]]:
    """``samples`` put under ``data/`` in ``bucket``: its URL, and its options with ``endpoint``."""
    for key, data in samples.items():
        bucket.put(f"data/{key}", data)
    return bucket.url("data"), {**bucket.options(), "endpoint": endpoint}


@pytest.fixture
def no_sdk_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.usefixtures("no_sdk_ca")
def test_an_object_store_behind_an_untrusted_certificate_fails_at_once_naming_it(tls_bucket: tuple[str, dict[str, Any]]) -> None:
    url, options = tls_bucket
    with pytest.raises(StorageUnreachableError) as refused:
        open_storage(url, retry=PATIENT, **options)
    message = str(refused.value)
    host = urlsplit(options["endpoint"]).netloc
    assert f"the TLS certificate of {host} is not trusted (UnknownIssuer" in message and "ca_bundle=" in message, message
    assert "\n" not in message and "Debug source" not in message, message


@pytest.mark.usefixtures("no_sdk_ca")
@pytest.mark.parametrize("how", ["ca_bundle", "sdk", "SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_an_object_store_behind_a_private_ca_reads_when_its_ca_is_trusted(
    how: str,
    object_bucket: TestBucket,
    tls_bucket: tuple[str, dict[str, Any]],
    ca: PrivateCa,
    samples: dict[str, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, options = tls_bucket
    if how == "ca_bundle":
        options["ca_bundle"] = ca.ca_file
    elif how == "sdk":
        monkeypatch.setenv(SDK_VARIABLE[object_bucket.store], str(ca.ca_file))
    elif how == "SSL_CERT_FILE":
        monkeypatch.setenv(how, str(ca.ca_file))
    else:
        monkeypatch.setenv(how, str(ca.hashed_folder(tmp_path / "certs")))
    assert _read_all(open_storage(url, retry=PATIENT, **options)) == _by_name(samples)


@pytest.mark.usefixtures("no_sdk_ca")
def test_parquet_read_in_place_behind_an_untrusted_certificate_fails_at_once_naming_it(
    tls_bucket: tuple[str, dict[str, Any]], object_bucket: TestBucket
) -> None:
    # Parquet on a store is listed first (a glob): that listing names the certificate too.
    url, options = tls_bucket
    with pytest.raises(StorageUnreachableError) as refused:
        open_storage(url + "/*.parquet", retry=PATIENT, **options)
    message = str(refused.value)
    assert f"the TLS certificate of {urlsplit(options['endpoint']).netloc} is not trusted (UnknownIssuer" in message, message
    assert "\n" not in message and "Debug source" not in message, message
