"""benchmarks/images/torch_dataloader.py runs (at 1/100 scale) and reports every loader on every row it can run,
and pairs the working tree with an earlier commit when asked."""

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


@pytest.mark.timeout(300)
def test_the_benchmark_pairs_the_working_tree_with_an_earlier_commit() -> None:
    if subprocess.run(["git", "-C", str(BENCHMARK.parent), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: --against reads the history")
    command = [sys.executable, str(BENCHMARK), "--quick", "--rows", "cheap", "--loaders", "stoker", "--against", "HEAD"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| cheap"))
    cells = [cell.strip() for cell in row.split("|")[2:-1]]
    assert len(cells) == 2 and all(cell.endswith("/s") for cell in cells), row  # stoker, and stoker@HEAD imported from HEAD's files
    assert "cheap, stoker: the working tree at " in done.stdout and "x HEAD" in done.stdout, done.stdout


def test_an_unknown_commit_or_loader_is_refused_by_name() -> None:
    unknown = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick", "--against", "no-such-commit-here"], capture_output=True, text=True, timeout=120
    )
    assert unknown.returncode != 0 and "--against no-such-commit-here" in unknown.stderr, unknown.stderr
    loader = subprocess.run([sys.executable, str(BENCHMARK), "--loaders", "tf.data"], capture_output=True, text=True, timeout=120)
    assert loader.returncode == 2 and "tf.data" in loader.stderr, loader.stderr
