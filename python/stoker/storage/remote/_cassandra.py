"""Cassandra/ScyllaDB storage (the Cassandra paper's layout): one row per sample, read by id with
one prepared statement, many requests in flight.

Schema (written by `stoker convert ... cassandra://...`):
- ``data(id uuid PRIMARY KEY, label int, data blob)``: the samples.
- ``metadata(id uuid PRIMARY KEY, key text, label int, ...)``: one row per sample with its name,
  label and any other columns (a patient, a site...), for listing and for `stoker split`.
  A metadata row is written after its data row: it is the commit record of a sample.
- ``dataset_info(name text PRIMARY KEY, value text)``: the class names.

Ids are UUIDv5 of the sample's key, so re-running an ingestion writes the same rows.

Reads use ``execute_async`` bridged to asyncio. The driver's "connection busy" and the server's
"overloaded" answers, and "no host up" while the driver reconnects, are backpressure: the
request waits and goes again without spending a retry (the deadline still bounds it); timeouts and lost connections are retried with backoff; a missing row is final.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ..._bounded import MAX_METADATA_BYTES, parse_json
from ...errors import ConfigurationError, StorageError
from ..policies import ErrorKind, RetryPolicy
from ._cassandra_connection import READ_PROFILE, CassandraConnection, QuietReplicas, ReadLatencies, check_identifier, replica_hedging
from ._remote import RemoteStorage

__all__ = ["SAMPLE_NAMESPACE", "CassandraStorage", "await_response", "read_metadata_table", "sample_id"]

SAMPLE_NAMESPACE = uuid.UUID("6f1d3c2e-5b7a-4c0e-9a51-2c8e7d4b9f10")


def sample_id(key: str) -> uuid.UUID:
    """The row id of the sample named ``key`` (UUIDv5: the same key always has the same id)."""
    return uuid.uuid5(SAMPLE_NAMESPACE, key)


def await_response(response: Any) -> asyncio.Future[Any]:
    """An asyncio future for a driver ``ResponseFuture`` on the running loop (the driver calls
    back from its own threads)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, failed: bool) -> None:
        if not future.done():
            future.set_exception(result) if failed else future.set_result(result)

    def deliver(result: Any, failed: bool) -> None:
        # A request still out when the storage closed (one to a dead node times out late)
        # answers into a closed loop: nobody waits for it any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, failed)

    response.add_callbacks(lambda rows: deliver(rows, False), lambda error: deliver(error, True))
    return future


def classify_cassandra_error(error: BaseException) -> ErrorKind:
    """Busy connections and overloaded servers are backpressure; lost connections and timeouts
    are retried; anything else (bad query, login refused, missing row) is final."""
    from cassandra import OperationTimedOut, ReadTimeout, Unavailable
    from cassandra.cluster import NoHostAvailable
    from cassandra.connection import ConnectionBusy, ConnectionException
    from cassandra.protocol import OverloadedErrorMessage, ServerError

    if isinstance(error, StorageError):
        return "fatal"
    if isinstance(error, (ConnectionBusy, OverloadedErrorMessage)):
        return "overload"
    if isinstance(error, NoHostAvailable):
        causes = list(error.errors.values())
        # No cause: no host is up right now and the driver is reconnecting; waiting for it is
        # backpressure too, bounded by the deadline rather than by attempts.
        if all(isinstance(cause, ConnectionBusy) for cause in causes):
            return "overload"
        return "retry"
    if isinstance(error, (OperationTimedOut, ReadTimeout, Unavailable, ConnectionException, ServerError, OSError)):
        return "retry"
    return "fatal"


class CassandraStorage(RemoteStorage):
    """Samples in a Cassandra or ScyllaDB keyspace.

    Args:
        connection: A ``cassandra://`` URL or `CassandraConnection`.
        keys: Read only these samples (e.g. one split from `stoker split`); default: every sample
            with a metadata row, in key order.
        max_in_flight_per_host: Requests outstanding per host (the paper keeps hundreds in flight).
        connections_per_host: Connections to each host, requests spread round robin. The Python
            driver keeps one connection per host (protocol v3+), whose single event-loop thread
            caps throughput; measured here with 100 KB rows, 2 give about 1.2-1.35x one.
        retry: See `RemoteStorage`.
        hedge: A read not answered within three times the median read latency (at least
            ``hedge_floor`` seconds) is sent to another replica of its row as well; the first
            answer is used (see `replica_hedging`). False: each read waits for its coordinator.
        hedge_floor: Least seconds before a read is hedged.
        options: Overrides for the connection (``username=``, ``tls=``, ...).

    Raises:
        StorageError: Cannot connect or log in, no such tables, or a key with no row.
    """

    def __init__(
        self,
        connection: str | CassandraConnection,
        *,
        keys: Sequence[str] | None = None,
        max_in_flight_per_host: int = 128,
        connections_per_host: int = 2,
        retry: RetryPolicy | None = None,
        hedge: bool = True,
        hedge_floor: float = 0.05,
        **options: Any,
    ) -> None:
        if connections_per_host < 1:
            raise ConfigurationError(f"connections_per_host must be positive, got {connections_per_host}")
        if isinstance(connection, str):
            connection = CassandraConnection.from_url(connection, **options)
        self.connection = connection
        super().__init__(max_in_flight=max_in_flight_per_host * len(connection.hosts), retry=retry)
        self._clusters: list[Any] = []
        self.read_latencies = ReadLatencies(floor=hedge_floor)
        self.quiet_replicas = QuietReplicas() if hedge else None
        try:
            # One driver Cluster per connection: each has its own connection to every host.
            sessions = []
            for _ in range(connections_per_host):
                hedging = replica_hedging(self.read_latencies) if hedge else None
                cluster, session = connection.connect(executor_threads=1, read_hedging=hedging, quiet=self.quiet_replicas, retry=self.retry)
                self._clusters.append(cluster)
                sessions.append(session)
            self._session = sessions[0]
            self._open(keys)
            self._routes = [(self._session, self._select)] + [
                (session, session.prepare(self._select.query_string)) for session in sessions[1:]
            ]
            for _, select in self._routes:
                select.is_idempotent = True  # a read: the driver may send copies of it
            # Taken in turn by every loop that reads (the storage's own, a pipeline's): the turn
            # is a read-modify-write, under the storage's lock (an itertools.cycle shared by
            # threads is not whole without the GIL: on 3.14.7t, 8 threads drawing 800,000 turns
            # of 4 got 200,005 of one and 199,995 of another).
            self._route_turn = 0
        except BaseException:
            self.close()
            raise

    def _open(self, keys: Sequence[str] | None) -> None:
        from cassandra import InvalidRequest

        keyspace, connection = self.connection.keyspace, self.connection
        try:
            rows = self._session.execute(f"SELECT key, label FROM {keyspace}.{connection.metadata_table}")
            listed = sorted(((row.key, row.label) for row in rows), key=lambda item: item[0])
            info = self._session.execute(f"SELECT value FROM {keyspace}.dataset_info WHERE name = 'classes'").one()
            self._select = self._session.prepare(f"SELECT data FROM {keyspace}.{connection.data_table} WHERE id = ?")
        except InvalidRequest as error:
            raise StorageError(f"{self.describe()}: not a stoker dataset ({error}); write one with `stoker convert`") from error
        classes = parse_json(info.value, f"{self.describe()}: its class names", max_bytes=MAX_METADATA_BYTES) if info is not None else None
        if classes is not None and not (isinstance(classes, list) and all(isinstance(name, str) for name in classes)):
            raise StorageError(f"{self.describe()}: its class names are not a list of names: {str(classes)[:80]!r}")
        self.classes = classes
        if keys is not None:
            label_of = dict(listed)
            missing = [key for key in keys if key not in label_of]
            if missing:
                raise StorageError(f"{self.describe()}: {len(missing)} keys have no metadata row, e.g. {missing[0]!r}")
            listed = [(key, label_of[key]) for key in keys]
        self._keys = [key for key, _ in listed]
        self._labels = [label for _, label in listed]
        self._ids = [sample_id(key) for key in self._keys]

    def describe(self) -> str:
        return self.connection.describe()

    def sample_name(self, index: int) -> str:
        return f"{self.describe()}/{self.connection.data_table}/{self._keys[index]} (id {self._ids[index]})"

    def _classify(self, error: BaseException) -> ErrorKind:
        return classify_cassandra_error(error)

    async def _request(self, index: int) -> bytes:
        with self._lock:
            session, select = self._routes[self._route_turn % len(self._routes)]
            self._route_turn += 1
        self.traffic.request("read")
        started = time.monotonic()
        response = session.execute_async(select, (self._ids[index],), execution_profile=READ_PROFILE)
        rows = await await_response(response)
        self.read_latencies.add(time.monotonic() - started)
        if self.quiet_replicas is not None:
            self.quiet_replicas.answered(response)
        if not rows:
            raise StorageError(f"{self.sample_name(index)}: listed in metadata but has no data row")
        self.traffic.received(len(rows[0][0]))
        return rows[0][0]

    def close(self) -> None:
        super().close()
        clusters, self._clusters = getattr(self, "_clusters", []), []
        for cluster in clusters:
            cluster.shutdown()


def read_metadata_table(connection: str | CassandraConnection, columns: Sequence[str]) -> dict[str, list[Any]]:
    """The ``key`` column and ``columns`` of every metadata row, in key order (for splits).

    Raises:
        StorageError: Cannot connect, or no such table or column (the columns there are listed).
    """
    from cassandra import InvalidRequest

    if isinstance(connection, str):
        connection = CassandraConnection.from_url(connection)
    wanted = [check_identifier(column, "column") for column in columns]
    cluster, session = connection.connect()
    try:
        table = f"{connection.keyspace}.{connection.metadata_table}"
        try:
            rows = list(session.execute(f"SELECT {', '.join(['key', *wanted])} FROM {table}"))
        except InvalidRequest as error:
            present = [
                row.column_name
                for row in session.execute(
                    "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
                    (connection.keyspace, connection.metadata_table),
                )
            ]
            raise StorageError(
                f"{connection.describe()}: cannot read {wanted} from {table} (its columns: {sorted(present)}): {error}"
            ) from error
    finally:
        cluster.shutdown()
    rows.sort(key=lambda row: row.key)
    return {column: [getattr(row, column) for row in rows] for column in ["key", *wanted]}
