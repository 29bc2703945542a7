"""A three-node Cassandra cluster on three hosts (replication 3) and a trainer on a fourth, through
benchmarks/distributed/cassandra_partition.py: a node cut off from every other host mid-epoch (a
partition, not a kill: it still runs, unreachable) changes nothing the trainer sees at QUORUM:
every sample once, as written, while the node stays cut off to the end of the epoch. The epoch
times, cut and uncut, are the benchmark's to report (docs/benchmarks.md), not this test's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from stoker_testbed.availability import unavailable
from stoker_testbed.hosts import HostNetwork

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "distributed" / "cassandra_partition.py"


def test_a_partitioned_node_changes_nothing_at_quorum(hosts: type[HostNetwork]) -> None:
    run = subprocess.run([sys.executable, str(BENCHMARK), "--samples", "400"], capture_output=True, text=True, timeout=1200)
    if "cannot start a 3-node Cassandra cluster" in run.stderr:
        unavailable("a 3-node Cassandra cluster on 3 hosts", run.stderr.strip().splitlines()[-1])
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split(" | ") for line in run.stdout.splitlines() if line.startswith("| yes ")]
    assert len(rows) == 1, run.stdout
    assert rows[0][-1].strip(" |") == "yes", f"every sample once, as written, in both epochs:\n{run.stdout}"
    assert "c2 kept running while cut off (a partition, not a kill): yes" in run.stdout
