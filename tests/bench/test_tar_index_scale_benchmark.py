"""benchmarks/storage/tar_index_scale.py runs (10^5 members in sparse shards) and prints its row: opening,
the first batch, both windows' rates, peak RSS, the checkpoint's time and size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "storage" / "tar_index_scale.py"


def test_the_tar_index_scale_benchmark_runs(tmp_path: Path) -> None:
    arguments = ["--sizes", "1e5", "--window", "5000", "--data", str(tmp_path)]
    done = subprocess.run([sys.executable, str(BENCHMARK), *arguments], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    [row] = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| 1e+05 |")]
    assert row[1].strip() == "1" and row[2].strip().endswith("MB"), done.stdout  # one shard of 100,000, its index's size
    assert all(row[column].strip().replace(",", "").isdigit() for column in (6, 7)), done.stdout  # both windows' rates
    assert row[11].strip().endswith(" B") and float(row[10].split()[0]) >= 0, done.stdout
