"""benchmarks/images/torch_dataloader.py runs (at 1/100 scale) and reports every loader on every row it can run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "images" / "torch_dataloader.py"


# Fifteen processes with torch (five rows, three loaders) at 1/100 scale: about two minutes on a
# quiet machine, and past pytest's 300 s once at load 10 at a parallel run's end. The bound is
# for hangs.
@pytest.mark.timeout(600)
def test_the_benchmark_runs_every_row() -> None:
    done = subprocess.run([sys.executable, str(BENCHMARK), "--quick"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and not line.startswith("| row")]
    expected = ["cheap", "python", "latency", "memory"]
    if importlib.util.find_spec("torchvision") is not None:
        expected.append("images")
    else:
        assert "images: left out" in done.stdout, "a row that cannot run is named, not dropped in silence"
    assert [row.split("|")[1].strip() for row in rows] == expected
    assert "failed" not in done.stdout, done.stdout
