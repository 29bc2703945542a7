"""A silently partitioned Cassandra replica, timed: a 3-node cluster (replication 3) on three hosts
of its own and a trainer on a fourth reading ``--samples`` samples at QUORUM, one epoch with every
node reachable and one in which c2 is cut off from every other host (packets dropped, so nothing
answers and nothing fails) from the reader's fifth batch to the end of the epoch. Both with
stoker's replica hedging (a read not answered in time also goes to another replica) and, with
``--without-hedging``, both without it.

Run as root:  python benchmarks/distributed/cassandra_partition.py [--samples 400] [--without-hedging]

The trainer takes 20 ms a step (batch 8). What it cannot show: a real network's latency (the
hosts share one machine's loopback-fast bridge) and more than three nodes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stoker.ingest import upload_to_cassandra
from stoker.storage import CassandraConnection, MemoryStorage
from stoker_testbed.data.datasets import dataset
from stoker_testbed.hosts import HostNetwork, unavailable
from stoker_testbed.servers.cassandra_cluster import CassandraCluster
from stoker_testbed.servers.server import ServerError

ROOT = Path(__file__).resolve().parents[2]
NODES = ("c0", "c1", "c2")
UNAVAILABLE = "cannot start"

READER = """
import hashlib, json, sys, time
from stoker import Loader, Sampling
from stoker.storage import CassandraConnection, CassandraStorage, RetryPolicy
hosts, port, signal, hedge = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
connection = CassandraConnection(hosts=hosts, port=port, keyspace="hosts", consistency="QUORUM")
seen = {}
retry = RetryPolicy(attempts=None, base_delay=0.05, max_delay=0.5, deadline=120)
with CassandraStorage(connection, retry=retry, hedge=hedge) as storage:
    loader = Loader(storage, batch_size=8, sampling=Sampling(seed=2))
    started = time.perf_counter()
    for step, batch in enumerate(loader):
        if step == 5 and signal:
            open(signal, "w").close()  # the partition starts now, reads go on
        for key, data in zip(batch.keys, batch.data):
            seen.setdefault(key, []).append(hashlib.sha256(bytes(data)).hexdigest())
        time.sleep(0.02)  # the training step
    seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "seen": seen}))
"""


def start_cluster(network: HostNetwork, samples: int) -> tuple[CassandraCluster, MemoryStorage]:
    """The cluster on hosts c0-c2, holding ``samples`` samples (written at ALL) in keyspace
    ``hosts``; close it when done."""
    nodes = [(network[name].address, network[name].prefix()) for name in NODES]
    cluster = CassandraCluster(3, hosts=nodes)
    try:
        cluster.start()
    except (ServerError, OSError) as error:
        cluster.close()
        raise SystemExit(f"{UNAVAILABLE} a 3-node Cassandra cluster on 3 hosts (needs java and mvn): {error}") from error
    source = dataset(samples)
    writer = CassandraConnection(hosts=cluster.hosts, port=cluster.port, keyspace="hosts", consistency="ALL")
    upload_to_cassandra(source, writer, replication=3, progress=False, decode_check=False)
    return cluster, source


def read_epoch(network: HostNetwork, cluster: CassandraCluster, signal: Path | None, *, hedge: bool = True) -> dict[str, Any]:
    """One timed epoch on the trainer host; with ``signal``, c2 is cut off from every other host
    from the reader's fifth batch to the end (and joined again after). Returns the reader's
    ``{"seconds": ..., "seen": {key: [sha256 of each delivery]}}``.

    Raises:
        RuntimeError: The reader failed (its error output attached).
    """
    command = [sys.executable, "-c", READER, ",".join(cluster.hosts), str(cluster.port), str(signal or ""), "1" if hedge else "0"]
    reader = subprocess.Popen([*network["trainer"].prefix(), *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    cut = False
    try:
        if signal is not None:
            deadline = time.monotonic() + 180
            while not signal.exists() and reader.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if signal.exists():
                for other in ("c0", "c1", "trainer"):
                    network.partition("c2", other)
                cut = True
        out, err = reader.communicate(timeout=600)
    finally:
        if cut:
            for other in ("c0", "c1", "trainer"):
                network.heal("c2", other)
    if reader.returncode != 0 or (signal is not None and not cut):
        raise RuntimeError(f"the reader failed:\n{err[-3000:]}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def digests(source: MemoryStorage) -> dict[str, list[str]]:
    """Each sample's sha256, as a reader that got every sample once reports it."""
    keys = list(source.keys)
    return {key: [hashlib.sha256(data).hexdigest()] for key, data in zip(keys, source.read_many(keys))}  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument(
        "--without-hedging", action="store_true", help="also time both epochs with hedging off (the cut one waits out timeouts)"
    )
    args = parser.parse_args()
    reason = unavailable()
    if reason is not None:
        raise SystemExit(f"benchmarks/distributed/cassandra_partition.py needs network namespaces: {reason}")
    rows = []
    with HostNetwork([*NODES, "trainer"]) as network:
        cluster, source = start_cluster(network, args.samples)
        try:
            expected = digests(source)
            for hedge in (True, False) if args.without_hedging else (True,):
                uncut = read_epoch(network, cluster, None, hedge=hedge)
                cut = read_epoch(network, cluster, Path(tempfile.mkdtemp(prefix="stoker-cut-")) / "now", hedge=hedge)
                whole = uncut["seen"] == expected and cut["seen"] == expected
                rows.append((hedge, uncut["seconds"], cut["seconds"], whole))
            running = cluster.nodes[2].running
        finally:
            cluster.close()
    print(f"{args.samples} samples at QUORUM, replication 3, batch 8, a 20 ms step; c2 cut off from its fifth batch to the end")
    print("| hedged reads | epoch, all reachable | epoch, c2 cut off | cut / uncut | every sample once, as written |")
    print("| --- | ---: | ---: | ---: | --- |")
    for hedge, uncut_seconds, cut_seconds, whole in rows:
        print(
            f"| {'yes' if hedge else 'no'} | {uncut_seconds:.1f} s | {cut_seconds:.1f} s | {cut_seconds / uncut_seconds:.2f} | {'yes' if whole else 'NO'} |"
        )
    print(f"c2 kept running while cut off (a partition, not a kill): {'yes' if running else 'NO'}")


if __name__ == "__main__":
    main()
