"""Ingestion into Cassandra/ScyllaDB: any `Storage` into a keyspace (the paper's data and metadata
tables), with bounded concurrency, a progress bar, retries, and resume (object stores:
`_object_upload`).

Resume: a sample's metadata row is written after its data row and is its commit record: samples
with one are skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..errors import ConfigurationError, StorageError
from ..storage import Storage
from ..storage.policies import ErrorKind, RetryPolicy, call_with_retries
from ..storage.remote import (
    CassandraConnection,
    await_response,
    check_identifier,
    classify_cassandra_error,
    sample_id,
)
from ._bounded import bounded
from ._convert import ConversionReport, _progress
from ._decode_check import checked, with_check

T = TypeVar("T")

__all__ = ["upload_to_cassandra"]


def classify_schema_error(error: BaseException) -> ErrorKind:
    """As `classify_cassandra_error`, and one more transient case while a schema is being made:
    a node that has not yet learnt of the keyspace or table made a statement before answers
    "doesn't exist" / "unconfigured table" until the change reaches it."""
    from cassandra import InvalidRequest

    if isinstance(error, InvalidRequest) and ("doesn't exist" in str(error) or "unconfigured table" in str(error)):
        return "retry"
    return classify_cassandra_error(error)


def wait_for_schema_agreement(session: Any) -> None:
    """Block until every live node reports the same schema version (the driver's own check,
    which a statement answered with "already exists" skips: that answer carries no change)."""
    session.cluster.control_connection.wait_for_schema_agreement(wait_time=session.cluster.max_schema_agreement_wait)


def retried(call: Callable[[], T], connection: CassandraConnection, policy: RetryPolicy, what: str) -> T:
    """``call()`` (a blocking driver request, run on a thread) through ``policy``, as the row
    writes are: a coordinator that briefly sees too few replicas alive (Unavailable while gossip
    settles, a node restarting) is waited out until the deadline, then named."""

    async def attempt() -> T:
        return await asyncio.to_thread(call)

    return asyncio.run(call_with_retries(attempt, policy=policy, classify=classify_cassandra_error, name=f"{connection.describe()} {what}"))


def create_schema(session: Any, connection: CassandraConnection, columns: list[str], replication: int, policy: RetryPolicy) -> None:
    """Keyspace, data, metadata (with ``columns`` as text) and info tables, if missing. Each
    statement goes through ``policy`` like the writes: a schema change that times out while a
    node is busy or restarting is tried again (the CREATEs are idempotent)."""
    keyspace = connection.keyspace
    # The driver answers a schema change only after refreshing its schema on its own executor,
    # outside the request's timeout; once (in a CI run) such an answer never came and a CREATE
    # waited past 300 s. So an attempt has a bound of its own, twice the request's timeout and
    # the agreement wait; past it the attempt has failed (a TimeoutError, retried).
    bound = 2 * (connection.request_timeout + session.cluster.max_schema_agreement_wait)

    def execute(statement: str, parameters: tuple[Any, ...] | None = None) -> Any:
        async def attempt() -> Any:
            result = await await_response(session.execute_async(statement, parameters))
            if statement.startswith(("CREATE", "ALTER")):
                await asyncio.to_thread(wait_for_schema_agreement, session)
            return result

        async def request() -> Any:
            return await asyncio.wait_for(attempt(), bound)

        return asyncio.run(
            call_with_retries(request, policy=policy, classify=classify_schema_error, name=f"{connection.describe()} (schema)")
        )

    execute(
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {replication}}}"
    )
    # speculative_retry: a coordinator that has not heard from a replica within 20 ms asks another
    # one too (Cassandra's default waits for the table's 99th percentile, which a replica that has
    # just gone quiet drives up: the reader's own hedging cannot help a coordinator waiting on
    # it). With one of three replicas cut off at QUORUM, epochs took 0.78-1.04x an uncut one with
    # it, 0.79-2.45x without (benchmarks/distributed/cassandra_partition.py).
    execute(
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{connection.data_table} (id uuid PRIMARY KEY, label int, data blob) "
        "WITH speculative_retry = '20ms'"
    )
    execute(f"CREATE TABLE IF NOT EXISTS {keyspace}.{connection.metadata_table} (id uuid PRIMARY KEY, key text, label int)")
    execute(f"CREATE TABLE IF NOT EXISTS {keyspace}.dataset_info (name text PRIMARY KEY, value text)")
    rows = execute(
        "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, connection.metadata_table),
    )
    present = {row.column_name for row in rows}
    for column in columns:
        if column not in present:
            execute(f"ALTER TABLE {keyspace}.{connection.metadata_table} ADD {column} text")


def upload_to_cassandra(
    source: Storage,
    connection: str | CassandraConnection,
    *,
    metadata: Mapping[str, Mapping[str, str]] | None = None,
    concurrency: int = 8,
    replication: int = 1,
    progress: bool = True,
    retry: RetryPolicy | None = None,
    decode_check: bool = True,
) -> ConversionReport:
    """Write ``source`` into a keyspace: data rows, then metadata rows (key, label and the extra
    ``metadata`` columns of each sample, e.g. ``{"cat/1.jpg": {"patient": "p7"}}``).

    Args:
        decode_check: Leave out (and list in the report) empty files and images that do not
            decode, as `convert_storage` does; False writes every sample as it is.
        concurrency: Samples being written at once (about 8 keeps a single node with 100 KB blobs
            from reporting the connection overloaded).
        replication: Replication factor of a keyspace this creates.

    Raises:
        StorageError: Cannot connect or log in, or a write kept failing (names the sample).
    """
    if isinstance(connection, str):
        connection = CassandraConnection.from_url(connection)
    source, check = checked(source, decode_check)
    policy = retry or RetryPolicy()
    columns = sorted({column for row in (metadata or {}).values() for column in row})
    for column in columns:
        check_identifier(column, "metadata column")
        if column in ("id", "key", "label"):
            raise ConfigurationError(f"metadata column {column!r} clashes with the metadata table's own columns")
    cluster, session = connection.connect()
    try:
        create_schema(session, connection, columns, replication, policy)
        keyspace = connection.keyspace
        done = retried(
            lambda: {row.key for row in session.execute(f"SELECT key FROM {keyspace}.{connection.metadata_table}")},
            connection,
            policy,
            "(rows already written)",
        )
        insert_data = session.prepare(f"INSERT INTO {keyspace}.{connection.data_table} (id, label, data) VALUES (?, ?, ?)")
        names = ", ".join(["id", "key", "label", *columns])
        insert_metadata = session.prepare(
            f"INSERT INTO {keyspace}.{connection.metadata_table} ({names}) VALUES ({', '.join('?' * (3 + len(columns)))})"
        )
        labels = dict(zip(source.keys, source.labels))
        total = 0

        async def write(statement: Any, values: tuple[Any, ...], key: str) -> None:
            await call_with_retries(
                lambda: await_response(session.execute_async(statement, values)),
                policy=policy,
                classify=classify_cassandra_error,
                name=f"{connection.describe()}/{key}",
            )

        async def one(item: tuple[str, bytes]) -> None:
            nonlocal total
            key, data = item
            identifier = sample_id(key)
            extra = (metadata or {}).get(key, {})
            await write(insert_data, (identifier, labels[key], data), key)
            await write(insert_metadata, (identifier, key, labels[key], *(extra.get(column) for column in columns)), key)
            total += len(data)
            bar.update()

        def pending() -> Any:
            for key, data in source.iter_sequential():
                if key in done:
                    bar.update()
                else:
                    yield key, data

        with _progress(len(source), f"writing rows to {connection.describe()}", progress) as bar:
            asyncio.run(bounded(concurrency, pending(), one))
        classes = json.dumps(source.classes)
        retried(
            lambda: session.execute(f"INSERT INTO {keyspace}.dataset_info (name, value) VALUES ('classes', %s)", (classes,)),
            connection,
            policy,
            "(dataset_info)",
        )
        return with_check(ConversionReport(connection.describe(), "cassandra", len(source), total, 0), check)
    finally:
        cluster.shutdown()


def read_metadata_csv(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """``key,column1,column2...`` rows (a header names the columns) -> {key: {column: value}}."""
    import csv

    with open(path, newline="") as file:
        reader = csv.DictReader(file)
        if not reader.fieldnames or reader.fieldnames[0] != "key":
            raise StorageError(f"{path}: the first column must be 'key'")
        return {row["key"]: {name: value for name, value in row.items() if name != "key"} for row in reader}
