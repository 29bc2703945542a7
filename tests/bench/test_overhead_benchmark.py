"""benchmarks/loader/loader_overhead.py runs (on 64 images) and reports the overhead and the rate share."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "loader" / "loader_overhead.py"


def test_the_overhead_benchmark_runs() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARK), "--images", "64", "--rounds", "1"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Loader, memory: overhead" in done.stdout and "of the native decode's rate" in done.stdout, done.stdout
