"""Making a dataset's schema on Cassandra when an answer never comes: the driver answers a
schema change only after refreshing its schema on its own threads, outside the request's
timeout, and once (a CI run) a ``CREATE TABLE`` waited past 300 s for it. Each attempt now has
a bound of its own: it is tried again, and past the retry deadline the upload fails with the
keyspace's name. A driver session that never answers stands in for the wedged one (a real
server cannot be made to accept a statement and never answer it on cue)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from stoker.ingest._upload import create_schema
from stoker.storage import CassandraConnection, RetryPolicy, StorageUnavailableError

pytest.importorskip("cassandra")


class SilentResponse:
    """A driver ``ResponseFuture`` whose callbacks are never called."""

    def add_callbacks(self, callback: Any, errback: Any) -> None:
        pass


class SilentSession:
    """A driver session that takes every statement and never answers."""

    def __init__(self) -> None:
        self.cluster = SimpleNamespace(max_schema_agreement_wait=0.1)
        self.statements: list[str] = []

    def execute_async(self, statement: str, parameters: Any = None) -> SilentResponse:
        self.statements.append(statement)
        return SilentResponse()


def test_a_schema_change_that_is_never_answered_is_retried_then_named() -> None:
    session = SilentSession()
    connection = CassandraConnection(keyspace="silent", request_timeout=0.2)
    policy = RetryPolicy(base_delay=0.05, max_delay=0.1, deadline=2.0)
    outcome: list[BaseException | None] = []

    def make() -> None:
        try:
            create_schema(session, connection, [], 1, policy)
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            outcome.append(error)

    worker = threading.Thread(target=make, daemon=True)
    worker.start()
    worker.join(timeout=60)  # generous: the deadline is 2 s; a hang is the failure
    assert not worker.is_alive(), "making the schema hung on an answer that never came"
    (error,) = outcome
    assert isinstance(error, StorageUnavailableError), error
    assert "silent" in str(error) and "schema" in str(error), str(error)
    assert len(session.statements) >= 2 and all(statement.startswith("CREATE KEYSPACE") for statement in session.statements)
