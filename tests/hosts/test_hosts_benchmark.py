"""benchmarks/distributed/hosts.py runs on a small job and reports each host with and without its node cache,
the partition's cost, and each rank's threads' CPU."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from stoker_testbed.hosts import HostNetwork

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "distributed" / "hosts.py"


def test_the_hosts_benchmark_reports_its_table(hosts: type[HostNetwork]) -> None:
    run = subprocess.run(
        [sys.executable, str(BENCHMARK), "--samples", "160", "--partition", "2", "--threads"], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith(("| h0 ", "| h1 "))]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| h0", "one per host"],
        ["| h1", "one per host"],
        ["| h0", "none"],
        ["| h1", "none"],
    ]
    assert all(float(row.split(" | ")[2].replace(",", "")) > 0 for row in rows)
    paired = dict(re.findall(r"^  (h[01]): (\d+\.\d\d) \(", run.stdout, flags=re.MULTILINE))
    assert sorted(paired) == ["h0", "h1"] and all(float(ratio) > 0 for ratio in paired.values()), run.stdout
    cut = next(line for line in run.stdout.splitlines() if line.strip().startswith("h1: epoch"))
    assert "with" in cut
    # --threads: the cache's writer thread only in the jobs with a cache; the scheduler in both.
    threads = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in run.stdout.splitlines() if line.startswith("| stoker-")}
    assert threads["stoker-cache-writer"][1].startswith("-"), run.stdout
    assert threads["stoker-cache-writer"][0].endswith("us") and threads["stoker-loader-scheduler"][1].endswith("us |"), run.stdout


SCALE = BENCHMARK.parent / "scale.py"


def test_the_scale_benchmark_measures_each_job_against_its_model_and_projects(hosts: type[HostNetwork]) -> None:
    run = subprocess.run([sys.executable, str(SCALE), "--jobs", "2x1,2x2", "--samples", "320"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split(" | ") for line in run.stdout.splitlines() if line.startswith(("| 2 (2 x 1)", "| 4 (2 x 2)"))]
    assert len(rows) == 2, run.stdout
    for row in rows:
        gets = int(row[2].split(" (")[0].replace(",", ""))
        hits = float(row[4].split("%")[0])
        assert gets >= 320, f"every sample fetched at least once:\n{run.stdout}"
        assert 0 < hits < 50, f"two hosts' caches hit in epoch 1, never in epoch 0:\n{run.stdout}"
    assert "projected to 1,024 ranks" in run.stdout and "GETs/s" in run.stdout
