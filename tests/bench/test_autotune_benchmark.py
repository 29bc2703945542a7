"""benchmarks/loader/autotune.py runs its local scenarios (quick) and reports each against its grid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "loader" / "autotune.py"


def test_the_autotune_benchmark_runs() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARK), "--quick", "--scenarios", "adef"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    for title in (
        "(a) local JPEGs, compute-bound",
        "(d) local, 30 ms training step",
        "(e) local, 30 ms training step, CPU hog",
        "(f) local, a hog on one core",
    ):
        assert title in done.stdout, done.stdout
    assert done.stdout.count("autotune / grid best:") == 4, done.stdout
    assert "hogs got" in done.stdout
    assert "over the first 5 s" in done.stdout
