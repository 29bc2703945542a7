"""benchmarks/loader/provenance.py runs (64 images, one round) and reports the ledger's cost and size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "loader" / "provenance.py"


def test_the_provenance_benchmark_runs() -> None:
    pytest.importorskip("pyarrow")
    done = subprocess.run([sys.executable, str(BENCHMARK), "--images", "64", "--rounds", "1"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "| with `record_provenance` |" in done.stdout and "bytes a step as written" in done.stdout, done.stdout
