"""A one-node Apache Cassandra 5.0 on loopback, from the ``cassandra-all`` jar on Maven Central.

The jar carries no configuration, so this writes a minimal ``cassandra.yaml`` (password
authentication on, everything on 127.0.0.1, free ports) and a logback configuration, and starts
the daemon with the JVM flags of Cassandra's ``conf/jvm17-server.options``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from stoker_testbed.servers.s3_server import MAVEN_CENTRAL
from stoker_testbed.servers.server import ServerError, ServerProcess, free_port, installing, require_java, server_cache, wait_for_port

__all__ = ["CASSANDRA_VERSION", "CassandraServer"]

CASSANDRA_VERSION = "5.0.9"

# conf/jvm17-server.options of Cassandra 5.0 (GC and module-system flags) and jvm-server.options.
JVM_FLAGS = [
    "-XX:+UseG1GC",
    "-XX:+ParallelRefProcEnabled",
    "-XX:MaxTenuringThreshold=1",
    "-XX:G1HeapRegionSize=16m",
    "-XX:G1RSetUpdatingPauseTimePercent=5",
    "-XX:MaxGCPauseMillis=300",
    "-XX:InitiatingHeapOccupancyPercent=70",
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports",
    "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports",
    "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports",
    "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports",
    "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports",
    "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports",
    "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports",
    "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports",
    "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens",
    "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens",
    "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
    "-ea",
    "-XX:+UseThreadPriorities",
    "-Xss256k",
    "-XX:+UseTLAB",
    "-XX:+ResizeTLAB",
    "-XX:+PerfDisableSharedMem",
    "-Djava.net.preferIPv4Stack=true",
]

LOGBACK = """<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level [%thread] %logger{20} %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


def cassandra_jars() -> Path:
    """The folder of ``cassandra-all`` and its runtime dependencies, fetched once with Maven.

    Raises:
        ServerError: Maven is missing or the download failed.
    """
    folder = server_cache(f"cassandra-{CASSANDRA_VERSION}")
    jars = folder / "lib"
    if (jars / f"cassandra-all-{CASSANDRA_VERSION}.jar").exists():
        return jars
    maven = shutil.which("mvn")
    if maven is None:
        raise ServerError("Maven (mvn) is not installed; it fetches Cassandra's jars from Maven Central")
    with installing(folder):
        if not (jars / f"cassandra-all-{CASSANDRA_VERSION}.jar").exists():
            _fetch(maven, folder, jars)
    return jars


def _fetch(maven: str, folder: Path, jars: Path) -> None:
    (folder / "pom.xml").write_text(
        f"""<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>stoker</groupId><artifactId>cassandra-server</artifactId><version>1</version>
<repositories><repository><id>central</id><url>{MAVEN_CENTRAL}</url></repository></repositories>
<dependencies><dependency><groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId>
<version>{CASSANDRA_VERSION}</version></dependency></dependencies></project>
"""
    )
    partial = folder / "lib.part"
    shutil.rmtree(partial, ignore_errors=True)
    result = subprocess.run(
        [maven, "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={partial}", "-DincludeScope=runtime"],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ServerError(f"mvn could not fetch cassandra-all {CASSANDRA_VERSION}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    partial.replace(jars)


class CassandraServer(ServerProcess):
    """``with CassandraServer() as server:`` then connect to ``server.host:server.port`` as
    ``server.username`` / ``server.password``.

    Args:
        port: Native-protocol port (default: a free one). A restart keeps the port and the data.
        heap: JVM heap (``-Xms`` and ``-Xmx``).
        host: The loopback address it listens on (a node of a `CassandraCluster`: 127.0.0.2...).
        storage_port: Gossip port (default: a free one; a cluster's nodes share one).
        seeds: ``host:port`` of the seed node (default: this node alone).
        initial_token: This node's token in a cluster (it then joins without streaming data).
        authenticate: Password authentication (off for a cluster: ``system_auth`` would live
            on one node, and losing it would refuse every login).
    """

    name = "cassandra"
    startup_timeout = 180.0
    host = "127.0.0.1"
    username = "cassandra"  # the default superuser Cassandra creates on first start
    password = "cassandra"

    def __init__(
        self,
        port: int | None = None,
        heap: str = "768M",
        *,
        host: str = "127.0.0.1",
        storage_port: int | None = None,
        seeds: str | None = None,
        initial_token: int | None = None,
        authenticate: bool = True,
    ) -> None:
        super().__init__()
        self.host = host
        self.port = port or free_port()
        self.storage_port = storage_port or free_port()
        self.jmx_port = free_port()
        self.heap = heap
        self.seeds = seeds or f"{host}:{self.storage_port}"
        self.initial_token = initial_token
        if not authenticate:
            self.username = self.password = None  # type: ignore[assignment]

    def _config(self) -> Path:
        data = self.workdir / "data"
        config = self.workdir / "cassandra.yaml"
        lines = [
            "cluster_name: stoker-test",
            "num_tokens: 1",
            "partitioner: org.apache.cassandra.dht.Murmur3Partitioner",
            f"data_file_directories: [{data / 'data'}]",
            f"commitlog_directory: {data / 'commitlog'}",
            f"saved_caches_directory: {data / 'saved_caches'}",
            f"hints_directory: {data / 'hints'}",
            f"cdc_raw_directory: {data / 'cdc_raw'}",
            "commitlog_sync: periodic",
            "commitlog_sync_period: 10000ms",
            "seed_provider:",
            "  - class_name: org.apache.cassandra.locator.SimpleSeedProvider",
            f"    parameters: [{{seeds: '{self.seeds}'}}]",
            f"listen_address: {self.host}",
            f"rpc_address: {self.host}",
            f"storage_port: {self.storage_port}",
            f"native_transport_port: {self.port}",
            "start_native_transport: true",
            "endpoint_snitch: SimpleSnitch",
            f"authenticator: {'PasswordAuthenticator' if self.username else 'AllowAllAuthenticator'}",
            "authorizer: AllowAllAuthorizer",
            "role_manager: CassandraRoleManager",
            "concurrent_reads: 16",
            "concurrent_writes: 16",
            "batch_size_warn_threshold: 1MiB",
            "batch_size_fail_threshold: 4MiB",
        ]
        if self.initial_token is not None:  # a node of a new cluster: its token, no streaming
            lines += [f"initial_token: {self.initial_token}", "auto_bootstrap: false"]
            # Nodes sharing 2 cores pause for each other (JIT, GC); the default threshold (8)
            # convicts a live peer during such a pause. 12 is the value Cassandra's own docs
            # give for networks that stall; a node cut off is still convicted within seconds.
            lines.append("phi_convict_threshold: 12")
        config.write_text("\n".join(lines) + "\n")
        (self.workdir / "logback.xml").write_text(LOGBACK)
        return config

    def _command(self) -> Sequence[str]:
        config = self._config()
        jars = cassandra_jars()
        return [
            require_java(),
            f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            *JVM_FLAGS,
            f"-Dcassandra.config=file://{config}",
            f"-Dcassandra.storagedir={self.workdir / 'data'}",
            f"-Dcassandra.logdir={self.workdir}",
            f"-Dlogback.configurationFile={self.workdir / 'logback.xml'}",
            f"-Dcassandra.jmx.local.port={self.jmx_port}",
            "-Dcassandra-foreground=yes",
            # One node: no ring to settle, and the default superuser at once instead of after 10 s.
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            "-Dcassandra.ring_delay_ms=0",
            "-Dcassandra.superuser_setup_delay_ms=0",
            "-cp",
            os.pathsep.join([str(jars / "*")]),
            "org.apache.cassandra.service.CassandraDaemon",
        ]

    def _ready(self) -> bool:
        if not wait_for_port(self.host, self.port, 0.2):
            return False
        if self.username is None:
            return self._login_works()
        # The port opens a moment before the default superuser exists: wait for it.
        return "Created default superuser role" in self.log_path.read_text(errors="replace") or self._login_works()

    def _login_works(self) -> bool:
        try:
            from stoker.storage import CassandraConnection
        except ImportError:
            return True
        connection = CassandraConnection(
            hosts=[self.host], port=self.port, username=self.username, password=self.password, connect_timeout=2
        )
        try:
            cluster, _ = connection.connect(executor_threads=1)
        except Exception:
            return False
        cluster.shutdown()
        return True
