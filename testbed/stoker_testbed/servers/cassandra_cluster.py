"""A Cassandra cluster on this machine: ``nodes`` `CassandraServer` processes on 127.0.0.1,
127.0.0.2, ... (all of 127.0.0.0/8 is loopback on Linux), one gossip and one native port shared
as a real cluster's nodes share them, tokens spread evenly so the nodes join at once without
streaming, small heaps (2 cores, 24 GiB). A node can be killed and started again; it rejoins
with its data."""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType

from stoker_testbed.servers.cassandra_server import CassandraServer
from stoker_testbed.servers.server import ServerError, free_port, wait_for_port

__all__ = ["CassandraCluster"]


class CassandraCluster:
    """``with CassandraCluster(3) as cluster:`` then connect to ``cluster.hosts`` on ``cluster.port``.

    Args:
        nodes: How many nodes.
        heap: Each node's JVM heap.
        hosts: Put the nodes on test hosts instead: (address, command prefix) per node
            (``HostNetwork``'s ``host.address`` and ``host.prefix()``).
    """

    def __init__(self, nodes: int = 3, heap: str = "512M", *, hosts: Sequence[tuple[str, Sequence[str]]] = ()) -> None:
        self.port, storage_port = free_port(), free_port()
        self.hosts = [address for address, _ in hosts] or [f"127.0.0.{number + 1}" for number in range(nodes)]
        seeds = f"{self.hosts[0]}:{storage_port}"
        spacing = 2**64 // nodes
        self.nodes = [
            CassandraServer(
                self.port,
                heap,
                host=host,
                storage_port=storage_port,
                seeds=seeds,
                initial_token=-(2**63) + number * spacing,
                authenticate=False,
            )
            for number, host in enumerate(self.hosts)
        ]
        for node, (_, prefix) in zip(self.nodes, hosts):
            node.prefix = prefix  # each node on a test host of its own (testbed/stoker_testbed/hosts.py)

    def start(self) -> None:
        """Start every node and wait until each serves and sees all the others up.

        Raises:
            ServerError: A node did not start, or the ring did not form.
        """
        self.nodes[0].start()  # the seed first: the others gossip with it
        for node in self.nodes[1:]:
            node.launch()
        for node in self.nodes[1:]:
            self._wait_gossiping(node)
        self.wait_until_up(len(self.nodes))

    def _wait_gossiping(self, node: CassandraServer, attempts: int = 3) -> None:
        """Wait until ``node`` serves, launching it again when it gave up on the seed.

        A node that is not a seed first asks the seed for the ring (the shadow round) and exits
        with "Unable to gossip with any peers" if no answer came within the ring delay, which
        the nodes run at 0 to start in seconds; a seed busy starting on 2 loaded cores can miss
        that second. The seed is up by then, so a second launch is answered.
        """
        for attempt in range(attempts):
            try:
                node.wait_ready()
                return
            except ServerError as error:
                if "Unable to gossip with any peers" not in str(error) or attempt == attempts - 1:
                    raise
                node.launch()

    def kill(self, number: int) -> None:
        """SIGKILL node ``number`` (its data stays for `restart`)."""
        self.nodes[number].kill()

    def restart(self, number: int) -> None:
        """Start node ``number`` again and wait until the ring sees every node up."""
        node = self.nodes[number]
        if number == 0:
            node.start()
        else:
            node.launch()
            self._wait_gossiping(node)
        self.wait_until_up(len(self.nodes))

    def up_hosts(self) -> set[str]:
        """The nodes whose process runs and whose native port answers."""
        return {node.host for node in self.nodes if node.running and wait_for_port(node.host, self.port, 0.5)}

    def joined(self) -> int:
        """How many nodes the seed knows as owners of the ring (itself and its peers that have
        tokens: a node still bootstrapping is listed without them, and a keyspace made then gets
        fewer replicas than asked for), counted only once all of them agree on the schema."""
        from stoker.storage import CassandraConnection

        connection = CassandraConnection(hosts=[self.hosts[0]], port=self.port, connect_timeout=5)
        cluster, session = connection.connect(executor_threads=1)
        try:
            peers = list(session.execute("SELECT peer, tokens, schema_version FROM system.peers_v2"))
            local = session.execute("SELECT schema_version FROM system.local").one()
            versions = {peer.schema_version for peer in peers} | {local.schema_version}
            owners = [peer for peer in peers if peer.tokens]
            return 1 + len(owners) if len(versions) == 1 else 0
        finally:
            cluster.shutdown()

    def every_node_sees_every_other(self) -> bool:
        """Whether each node, as coordinator, counts every node alive: a read at ALL of a keyspace
        replicated on every node, sent to each node in turn. The seed can know the whole ring
        while another node still counts a peer down (its gossip lags after a start, or a node
        busy on a loaded machine was convicted for a moment); a write at ALL through that node
        would then be refused as Unavailable."""
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement

        from stoker.storage import CassandraConnection

        connection = CassandraConnection(hosts=[self.hosts[0]], port=self.port, connect_timeout=5)
        cluster, session = connection.connect(executor_threads=1)
        try:
            count = len(self.nodes)
            session.execute(
                f"CREATE KEYSPACE IF NOT EXISTS stoker_ring WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {count}}}"
            )
            session.execute("CREATE TABLE IF NOT EXISTS stoker_ring.probe (id int PRIMARY KEY)")
            probe = SimpleStatement("SELECT id FROM stoker_ring.probe WHERE id = 0", consistency_level=ConsistencyLevel.ALL)
            hosts = [host for host in cluster.metadata.all_hosts() if host.is_up]
            if len(hosts) < count:
                return False
            for host in hosts:
                session.execute(probe, host=host)
            return True
        finally:
            cluster.shutdown()

    def wait_until_up(self, count: int, timeout: float = 180.0) -> None:
        """Wait until ``count`` nodes serve, the seed knows all of them and (with every node
        running) each node counts every other alive.

        Raises:
            ServerError: Not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        seen, joined = set(), 0
        while time.monotonic() < deadline:
            seen = self.up_hosts()
            try:
                joined = self.joined()
            except Exception:
                joined = 0
            if len(seen) >= count and joined >= len(self.nodes):
                if count < len(self.nodes):
                    return
                try:
                    if self.every_node_sees_every_other():
                        return
                except Exception:
                    pass
            time.sleep(1.0)
        raise ServerError(f"{sorted(seen)} serve and the seed knows {joined} nodes, not {count}:\n{self.nodes[-1].log_tail()}")

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def __enter__(self) -> CassandraCluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()
