"""benchmarks/torch_dataloader.py runs (at 1/100 scale) and reports every loader on every row."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torchvision")

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "torch_dataloader.py"


def test_the_benchmark_runs_every_row() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARK), "--quick"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and not line.startswith("| row")]
    assert [row.split("|")[1].strip() for row in rows] == ["cheap", "python", "latency", "memory", "images"]
    assert "failed" not in done.stdout, done.stdout
