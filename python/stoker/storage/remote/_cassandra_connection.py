"""Where a Cassandra/ScyllaDB dataset lives, how to log in (a URL, credentials from the arguments
or the environment, TLS when asked), and how reads are routed: token-aware, hedged to another
replica when one is slow to answer.

``cassandra://host1,host2:9042/keyspace?data=data&metadata=metadata&tls=1&ca=/path/ca.pem``

Credentials: ``username``/``password`` arguments, else ``STOKER_CASSANDRA_USERNAME`` /
``STOKER_CASSANDRA_PASSWORD``. A password in the URL is refused (URLs end up in logs and shell
history). Nothing here logs or shows the password: `describe` names hosts and keyspace only.
"""

from __future__ import annotations

import os
import random
import re
import ssl
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

from ..._bounded import shown_logger
from ...errors import ConfigurationError, StorageError
from ..policies import RetryPolicy

__all__ = [
    "READ_PROFILE",
    "CassandraConnection",
    "QuietReplicas",
    "ReadLatencies",
    "check_identifier",
    "connection_error",
    "replica_hedging",
]

_log = shown_logger(__name__)
# Pauses between tries to connect (full jitter). One generator shared by every connecting thread:
# random.Random's methods each take its lock, so draws from several threads stay whole.
_JITTER = random.Random()

# The execution profile of sample reads: rows as plain tuples. The driver's default row factory
# builds a namedtuple class for every result (about 0.4 ms of CPU per 100 KB row here).
READ_PROFILE = "stoker-read"
# The driver's consistency levels (cassandra.ConsistencyLevel), named here so that a wrong name
# is refused before anything connects.
CONSISTENCY_LEVELS = ("ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM", "EACH_QUORUM", "LOCAL_ONE")

_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")


def check_identifier(value: str, what: str) -> str:
    """``value`` if it is a plain CQL identifier (keyspace, table and column names go into CQL
    text, where they cannot be bound parameters), else ValueError naming ``what``."""
    if not _IDENTIFIER.match(value):
        raise ConfigurationError(f"{what} {value!r} is not a plain CQL identifier (letters, digits, _)")
    return value


@dataclass
class CassandraConnection:
    """Connection settings of a Cassandra or ScyllaDB dataset.

    Attributes:
        hosts: Contact points.
        port: Native-protocol port.
        keyspace: The dataset's keyspace.
        data_table: ``(id uuid PRIMARY KEY, label int, data blob)``.
        metadata_table: ``(id uuid PRIMARY KEY, key text, label int, ...any text columns)``.
        username, password: Password authentication (None: none).
        tls: Connect with TLS; ``ca_file`` verifies the server, ``cert_file``/``key_file`` are a
            client certificate.
        connect_timeout: Seconds to connect.
        request_timeout: Seconds per request before the driver gives up on it.
        consistency: The consistency level of reads and writes (``ONE``, ``QUORUM``,
            ``LOCAL_QUORUM``, ``ALL``...; the driver's ``LOCAL_ONE`` by default). With
            replication 3, ``QUORUM`` reads survive one node down and see every ``QUORUM`` write.
    """

    hosts: list[str] = field(default_factory=lambda: ["127.0.0.1"])
    port: int = 9042
    keyspace: str = "stoker"
    data_table: str = "data"
    metadata_table: str = "metadata"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    connect_timeout: float = 10.0
    request_timeout: float = 20.0
    consistency: str = "LOCAL_ONE"

    def __post_init__(self) -> None:
        self.consistency = self.consistency.upper()
        if self.consistency not in CONSISTENCY_LEVELS:
            raise ConfigurationError(f"unknown consistency level {self.consistency!r}; one of {', '.join(CONSISTENCY_LEVELS)}")
        check_identifier(self.keyspace, "keyspace")
        check_identifier(self.data_table, "data table")
        check_identifier(self.metadata_table, "metadata table")
        if self.username is None:
            self.username = os.environ.get("STOKER_CASSANDRA_USERNAME")
        if self.password is None:
            self.password = os.environ.get("STOKER_CASSANDRA_PASSWORD")

    @classmethod
    def from_url(cls, url: str, **overrides: Any) -> CassandraConnection:
        """Settings from ``cassandra://hosts:port/keyspace?options``; ``overrides`` win.

        Raises:
            ValueError: Not a cassandra:// URL, or a password in it.
        """
        parsed = urlparse(url)
        if parsed.scheme not in ("cassandra", "scylla", "scylladb"):
            raise ConfigurationError(f"not a cassandra://hosts/keyspace URL: {url!r}")
        if parsed.password:
            raise ConfigurationError("put the password in STOKER_CASSANDRA_PASSWORD, not in the URL")
        netloc = parsed.netloc.rsplit("@", 1)[-1]
        port = 9042
        hosts_text = netloc
        if ":" in netloc.rsplit(",", 1)[-1]:
            hosts_text, port_text = netloc.rsplit(":", 1)
            port = int(port_text)
        options = {name: values[-1] for name, values in parse_qs(parsed.query).items()}
        settings: dict[str, Any] = {
            "hosts": [host for host in hosts_text.split(",") if host] or ["127.0.0.1"],
            "port": port,
            "keyspace": parsed.path.strip("/") or "stoker",
        }
        if parsed.username:
            settings["username"] = parsed.username
        for name, key in (
            ("data", "data_table"),
            ("metadata", "metadata_table"),
            ("ca", "ca_file"),
            ("cert", "cert_file"),
            ("key", "key_file"),
            ("consistency", "consistency"),
        ):
            if name in options:
                settings[key] = options[name]
        if "tls" in options:
            settings["tls"] = options["tls"].lower() in ("1", "true", "yes")
        settings.update(overrides)
        return cls(**settings)

    def describe(self) -> str:
        hosts = ",".join(self.hosts)
        return f"cassandra://{hosts}:{self.port}/{self.keyspace}"

    def ssl_context(self) -> ssl.SSLContext | None:
        if not (self.tls or self.ca_file):
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def connect(
        self,
        *,
        executor_threads: int = 2,
        read_hedging: Any = None,
        quiet: QuietReplicas | None = None,
        retry: RetryPolicy | None = None,
    ) -> tuple[Any, Any]:
        """A connected ``(cluster, session)`` (cassandra-driver); shut the cluster down when done.
        ``read_hedging``: the speculative-execution policy of sample reads (`replica_hedging`;
        None: none), for statements marked idempotent; ``quiet``: replicas that lately lost a
        hedge, asked last by the sample reads' routing; ``retry``: a cluster that cannot be
        reached is tried again until the policy's opening deadline (a job started while a node
        restarts, or a resume right after an outage, rides it out), saying so every
        ``log_every`` seconds; a refused login is final. None: one try.

        Raises:
            StorageError: Cannot reach the cluster (within the deadline) or log in; says which.
            ImportError: cassandra-driver is not installed.
        """
        try:
            import cassandra  # noqa: F401
        except ImportError as error:
            raise ImportError("Cassandra storage needs cassandra-driver: pip install 'stoker[cassandra]'") from error
        from cassandra import ConsistencyLevel
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy, TokenAwarePolicy
        from cassandra.query import tuple_factory

        def balancing() -> Any:
            return TokenAwarePolicy(DCAwareRoundRobinPolicy())

        def read_balancing() -> Any:
            return quiet.policy() if quiet is not None else balancing()

        auth = PlainTextAuthProvider(self.username, self.password or "") if self.username else None
        level = getattr(ConsistencyLevel, self.consistency)

        def cluster_object() -> Any:
            return Cluster(
                self.hosts,
                port=self.port,
                auth_provider=auth,
                ssl_context=self.ssl_context(),
                connect_timeout=self.connect_timeout,
                executor_threads=executor_threads,
                reconnection_policy=ExponentialReconnectionPolicy(0.2, 5.0),
                # A keyspace or table just made must be known to every node before the first
                # write or read of it (else "INCOMPATIBLE_SCHEMA"): busy clusters take longer than
                # the driver's 10 s default to agree.
                max_schema_agreement_wait=60,
                # Protocol v4: v5 wraps frames in checksummed segments that the Python driver
                # decodes in pure Python, a measurable share of the CPU per row.
                protocol_version=4,
                execution_profiles={
                    # Token-aware: each read goes straight to a replica of its row.
                    EXEC_PROFILE_DEFAULT: ExecutionProfile(
                        load_balancing_policy=balancing(), request_timeout=self.request_timeout, consistency_level=level
                    ),
                    READ_PROFILE: ExecutionProfile(
                        load_balancing_policy=read_balancing(),
                        request_timeout=self.request_timeout,
                        row_factory=tuple_factory,
                        consistency_level=level,
                        speculative_execution_policy=read_hedging,
                    ),
                },
            )

        policy = retry.for_opening() if retry is not None else None
        started = time.monotonic()
        said = started
        tries = 0
        while True:
            cluster = cluster_object()
            try:
                return cluster, cluster.connect()
            except Exception as error:
                cluster.shutdown()
                failure = connection_error(self, error)
                if policy is None or _login_refused(error):
                    raise failure from error
                pause = policy.pause(tries, _JITTER)
                if time.monotonic() + pause - started > policy.deadline:
                    raise StorageError(f"{failure} (tried for {time.monotonic() - started:.0f} s)") from error
                if time.monotonic() - said >= policy.log_every:
                    said = time.monotonic()
                    _log.warning("%s; still trying (%.0f s so far, up to %.0f s)", failure, said - started, policy.deadline)
                tries += 1
                time.sleep(pause)


def _login_refused(error: BaseException) -> bool:
    text = str(error)
    return "AuthenticationFailed" in text or "Bad credentials" in text or "authentication" in text.lower()


def connection_error(connection: CassandraConnection, error: BaseException) -> StorageError:
    """A clear error for a failed connection: authentication or unreachable."""
    text = str(error)
    if _login_refused(error):
        who = connection.username or "(no username)"
        return StorageError(f"{connection.describe()}: login refused for user {who!r} (check STOKER_CASSANDRA_USERNAME/PASSWORD)")
    return StorageError(f"{connection.describe()}: cannot connect ({type(error).__name__}: {text.splitlines()[0] if text else ''})")


# Hedged Cassandra/ScyllaDB reads that know the replicas: a read not answered within the hedge
# delay is sent to the next replica of its row as well, and the first answer is used.
#
# Reads are idempotent, so a second copy is safe. It matters most when a replica goes quiet without
# an error (a silent partition, a node stuck in a long GC pause): token-aware routing keeps
# choosing it as coordinator for a third of the rows (replication 3), and each such read waited
# out the driver's request timeout (20 s) before the retry; measured in the hosts harness, a
# partitioned node cost a 400-sample epoch at QUORUM about 85 s of stalls.
#
# The copy is the driver's own speculative execution, which sends it to the next host of the
# request's query plan: another replica, as the plan is token-aware. The delay follows the reads:
# three times the median of the last 64 read latencies, at least ``floor`` (so that a fast cluster
# does not send a copy of every read that meets a scheduling hiccup), 1 s until a latency is known.

_FIRST_DELAY = 1.0  # seconds before a copy while no read has answered yet


class ReadLatencies:
    """The last reads' latencies, and the hedge delay they give.

    Added to by every loop that reads (the storage's own, a pipeline's) and read by the driver's
    threads as each request starts: ``recent`` is behind ``_lock``, so the median never iterates
    it while another thread appends (without the GIL, "deque mutated during iteration").

    Args:
        floor: Least seconds before a copy is sent.
        factor: The delay in medians.
    """

    def __init__(self, floor: float = 0.05, factor: float = 3.0) -> None:
        self.floor = floor
        self.factor = factor
        self.recent: deque[float] = deque(maxlen=64)
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.recent.append(seconds)

    def delay(self) -> float:
        """Seconds a read waits before a copy goes to another replica."""
        with self._lock:
            recent = list(self.recent)
        if not recent:
            return max(self.floor, _FIRST_DELAY)
        return max(self.floor, self.factor * statistics.median(recent))


def replica_hedging(latencies: ReadLatencies, copies: int = 1) -> Any:
    """A driver speculative-execution policy: up to ``copies`` more copies of a read, each after
    ``latencies.delay()`` (read when the request starts), to the next replicas of its plan.

    Raises:
        ImportError: cassandra-driver is not installed.
    """
    from cassandra.policies import SpeculativeExecutionPlan, SpeculativeExecutionPolicy

    class _Plan(SpeculativeExecutionPlan):
        def __init__(self, delay: float) -> None:
            self.delay = delay
            self.left = copies

        def next_execution(self, host: Any) -> float:
            if self.left <= 0:
                return -1  # the driver's "no more copies"
            self.left -= 1
            return self.delay

    class _Policy(SpeculativeExecutionPolicy):
        def new_plan(self, keyspace: Any, statement: Any) -> _Plan:
            return _Plan(latencies.delay())

    return _Policy()


# A replica that lost a hedge (its copy of a read was not answered before another replica's) is
# asked last for a while. Hedging alone still sent every read of its rows to it first and waited
# the hedge delay each time: with one of three replicas cut off, a third of the reads paid it,
# 5.8 s against 1.8 s for a 400-sample epoch. A replica that is only slow for a moment is asked
# first again once its time is up.
QUIET_SECONDS = 5.0


class QuietReplicas:
    """Replicas that lately lost a hedge, by address, until when they are asked last.

    Written after each read (on the loops that read) and read by the driver's threads as they
    plan a request: each ``_until`` entry is one dict store or load (whole by itself); the
    ``demotions`` count is a read-modify-write, under ``_lock``.
    """

    def __init__(self, seconds: float = QUIET_SECONDS) -> None:
        self.seconds = seconds
        self._until: dict[str, float] = {}
        self.demotions = 0
        self._lock = threading.Lock()

    def answered(self, response: Any) -> None:
        """After a read: if another replica answered before the first one asked, that one is quiet."""
        tried, answered = getattr(response, "attempted_hosts", None), getattr(response, "coordinator_host", None)
        if not tried or answered is None or answered is tried[0]:
            return
        self._until[str(tried[0].endpoint.address)] = time.monotonic() + self.seconds
        with self._lock:
            self.demotions += 1

    def is_quiet(self, host: Any) -> bool:
        until = self._until.get(str(host.endpoint.address))
        return until is not None and until > time.monotonic()

    def policy(self) -> Any:
        """The token-aware policy of reads, with the quiet replicas moved to the end of each plan."""
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

        quiet = self

        class QuietLast(TokenAwarePolicy):
            def make_query_plan(self, working_keyspace: Any = None, query: Any = None) -> Any:
                plan = list(super().make_query_plan(working_keyspace, query))
                if not quiet._until:
                    return iter(plan)
                return iter([host for host in plan if not quiet.is_quiet(host)] + [host for host in plan if quiet.is_quiet(host)])

        return QuietLast(DCAwareRoundRobinPolicy())
