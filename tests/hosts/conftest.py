"""The multi-host tests' network: hosts made of network namespaces (testbed/stoker_testbed/hosts.py),
skipped with the reason where they cannot be made (not root), and required in CI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stoker.ingest import upload_to_s3
from stoker_testbed.availability import started, unavailable
from stoker_testbed.data.datasets import dataset
from stoker_testbed.hosts import HostNetwork
from stoker_testbed.hosts import unavailable as hosts_unavailable
from stoker_testbed.servers.s3_server import S3Server

SAMPLES = 320  # in the store's bucket "hosts" under d/


@pytest.fixture
def hosts() -> Iterator[type[HostNetwork]]:
    """`HostNetwork` where namespaces can be made here; the test skips (fails in CI) otherwise."""
    reason = hosts_unavailable()
    if reason is not None:
        unavailable("hosts as network namespaces", reason)
    yield HostNetwork


@pytest.fixture
def store_and_hosts(hosts: type[HostNetwork], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[HostNetwork, S3Server]]:
    """Hosts ``store``, ``h0`` and ``h1``; an S3 server on ``store`` holding `SAMPLES` samples
    under ``s3://hosts/d``, logging every request with the name the asking host used."""
    with hosts(["store", "h0", "h1"]) as network:
        monkeypatch.setenv("LOG_LEVEL", "debug")  # s3proxy logs every request, with the Host it was sent to
        server = S3Server(host=network["store"].address)
        server.prefix = network["store"].prefix()
        started(server, "the S3 test server (s3proxy, needs java) on a host of its own")
        try:
            server.create_bucket("hosts")
            upload_to_s3(dataset(SAMPLES), "s3://hosts/d", progress=False, decode_check=False, **server.options())
            yield network, server
        finally:
            server.close()
