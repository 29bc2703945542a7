"""Connecting to a Cassandra cluster that cannot be reached: with a retry policy (what
`CassandraStorage` passes) it is tried again, said in the log, until the opening deadline, then
raised naming the cluster and how long it tried; without one, one try. No server is needed: the
port has no listener."""

from __future__ import annotations

import logging
import socket
import time

import pytest

from stoker.errors import StorageError
from stoker.storage import CassandraConnection, RetryPolicy

pytest.importorskip("cassandra", reason="needs cassandra-driver (pip install 'stoker[cassandra]')")


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_cluster_is_tried_until_the_opening_deadline(caplog: pytest.LogCaptureFixture) -> None:
    connection = CassandraConnection(hosts=["127.0.0.1"], port=unused_port(), keyspace="nowhere", connect_timeout=0.5)
    policy = RetryPolicy(open_deadline=2.0, max_delay=0.2, log_every=0.5)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING), pytest.raises(StorageError) as caught:
        connection.connect(executor_threads=1, retry=policy)
    took = time.monotonic() - started
    assert "cannot connect" in str(caught.value) and "tried for" in str(caught.value), caught.value
    assert "127.0.0.1" in str(caught.value)
    assert took >= 1.5, took  # it kept trying, and gave up at the deadline (not a bound on speed)
    assert any("still trying" in record.getMessage() for record in caplog.records), [r.getMessage() for r in caplog.records]


def test_without_a_policy_one_try_is_made() -> None:
    connection = CassandraConnection(hosts=["127.0.0.1"], port=unused_port(), keyspace="nowhere", connect_timeout=0.5)
    with pytest.raises(StorageError) as caught:
        connection.connect(executor_threads=1)
    assert "cannot connect" in str(caught.value) and "tried for" not in str(caught.value)
