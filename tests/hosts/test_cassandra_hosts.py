"""A three-node Cassandra cluster on three hosts (replication 3) and a trainer on a fourth: a node
cut off from every other host mid-epoch (a partition, not a kill: it still runs, unreachable)
changes nothing the trainer sees at QUORUM: every sample once, as written, while the node stays
cut off to the end of the epoch."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from stoker.ingest import upload_to_cassandra
from stoker.storage import CassandraConnection
from stoker_testbed.availability import started
from stoker_testbed.data.datasets import dataset
from stoker_testbed.hosts import HostNetwork
from stoker_testbed.servers.cassandra_cluster import CassandraCluster

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = 400

READER = """
import hashlib, json, sys, time
from stoker import Loader, Sampling
from stoker.storage import CassandraConnection, CassandraStorage, RetryPolicy
hosts, port, signal = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
connection = CassandraConnection(hosts=hosts, port=port, keyspace="hosts", consistency="QUORUM")
seen = {}
with CassandraStorage(connection, retry=RetryPolicy(attempts=None, base_delay=0.05, max_delay=0.5, deadline=120)) as storage:
    loader = Loader(storage, batch_size=8, sampling=Sampling(seed=2))
    for step, batch in enumerate(loader):
        if step == 5:
            open(signal, "w").close()  # the test cuts a node off now
            time.sleep(3)  # and reads go on while it is cut off
        for key, data in zip(batch.keys, batch.data):
            seen.setdefault(key, []).append(hashlib.sha256(bytes(data)).hexdigest())
        time.sleep(0.05)
print(json.dumps(seen))
"""


def test_a_partitioned_node_changes_nothing_at_quorum(hosts: type[HostNetwork], tmp_path: Path) -> None:
    import hashlib

    with hosts(["c0", "c1", "c2", "trainer"]) as network:
        nodes = [(network[name].address, network[name].prefix()) for name in ("c0", "c1", "c2")]
        cluster = started(CassandraCluster(3, hosts=nodes), "a 3-node Cassandra cluster on 3 hosts (needs java and mvn)")
        try:
            source = dataset(SAMPLES)
            writer = CassandraConnection(hosts=cluster.hosts, port=cluster.port, keyspace="hosts", consistency="ALL")
            upload_to_cassandra(source, writer, replication=3, progress=False, decode_check=False)
            signal = tmp_path / "cut-now"
            command = [sys.executable, "-c", READER, ",".join(cluster.hosts), str(cluster.port), str(signal)]
            reader = subprocess.Popen(
                [*network["trainer"].prefix(), *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
            )
            deadline = time.monotonic() + 120
            while not signal.exists() and reader.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert signal.exists(), reader.communicate()[1][-3000:]
            for other in ("c0", "c1", "trainer"):
                network.partition("c2", other)
            out, err = reader.communicate(timeout=300)
            assert reader.returncode == 0, err[-3000:]
            assert cluster.nodes[2].running, "the node was cut off, not killed"
        finally:
            cluster.close()
    seen = json.loads(out)
    written = {key: hashlib.sha256(data).hexdigest() for key, data in zip(source.keys, source.read_many(list(source.keys)))}  # type: ignore[arg-type]
    assert {key: digests for key, digests in seen.items()} == {key: [digest] for key, digest in written.items()}, (
        "every sample once, as written"
    )
