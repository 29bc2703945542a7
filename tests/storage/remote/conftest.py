"""Real servers for the network-storage tests: s3proxy and Cassandra 5.0 on loopback, started once
per test session. Without java (or Maven for Cassandra) the tests skip on a laptop and fail in
CI, where ``STOKER_REQUIRE_SERVERS`` is set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stoker.storage import CassandraConnection
from stoker_testbed.availability import started
from stoker_testbed.data.datasets import unique
from stoker_testbed.servers.cassandra_server import CassandraServer
from stoker_testbed.servers.s3_server import S3Server


@pytest.fixture(scope="session")
def cassandra_server() -> Iterator[CassandraServer]:
    server = started(CassandraServer(), "the Cassandra test server (needs java and mvn)")
    yield server
    server.close()


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    name = unique("bucket-")
    s3_server.create_bucket(name)
    return name


@pytest.fixture
def keyspace_connection(cassandra_server: CassandraServer) -> CassandraConnection:
    return CassandraConnection(
        hosts=[cassandra_server.host],
        port=cassandra_server.port,
        keyspace=unique("ks_").replace("-", "_"),
        username=cassandra_server.username,
        password=cassandra_server.password,
    )
