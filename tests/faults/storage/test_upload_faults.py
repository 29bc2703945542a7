"""An upload to Cassandra whose coordinator counts too few replicas alive (as while gossip settles
after a start, or a node restarts): every statement that touches rows, the read of what is already
written included, is waited out to the retry deadline and then named, never raised raw from the
driver. Against a real Cassandra, started here.

Before: the read of the rows already written went to the driver directly and raised its
``NoHostAvailable(Unavailable)`` at once (a 3-host CI run failed on it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stoker.ingest import upload_to_cassandra
from stoker.storage import CassandraConnection, RetryPolicy, StorageError
from stoker_testbed.availability import started
from stoker_testbed.data.datasets import dataset
from stoker_testbed.servers.cassandra_server import CassandraServer


@pytest.fixture(scope="module")
def server() -> Iterator[CassandraServer]:
    server = started(CassandraServer(), "the Cassandra test server (needs java and mvn)")
    yield server
    server.close()


def test_an_upload_that_sees_too_few_replicas_waits_for_them_then_names_the_store(server: CassandraServer) -> None:
    # Three replicas asked of a one-node cluster, written at ALL: the coordinator answers
    # Unavailable to every statement that touches rows.
    connection = CassandraConnection(
        hosts=[server.host], port=server.port, keyspace="too_few", username=server.username, password=server.password, consistency="ALL"
    )
    policy = RetryPolicy(attempts=None, base_delay=0.05, max_delay=0.2, deadline=2.0)
    with pytest.raises(StorageError, match=r"too_few \(rows already written\): gave up after .*Unavailable"):
        upload_to_cassandra(dataset(4), connection, replication=3, retry=policy, progress=False, decode_check=False)
