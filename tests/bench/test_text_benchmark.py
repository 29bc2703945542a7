"""benchmarks/text/token_batches.py runs (on a small corpus) and reports every loader it can run, stoker first,
with its packing efficiency, or names the one it left out and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "text" / "token_batches.py"


def test_the_text_benchmark_reports_its_table(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    run = subprocess.run(
        [sys.executable, str(BENCHMARK), "--megabytes", "3", "--seconds", "3", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows[0].startswith("| stoker |")
    cells = rows[0].split(" | ")
    assert float(cells[1].replace(",", "")) > 0 and float(cells[3].rstrip("%")) >= 95.0
    named = {row.split(" | ")[0].lstrip("| ") for row in rows} | {
        line.removeprefix("left out: ").rsplit(" (", 1)[0].strip() for line in run.stdout.splitlines() if line.startswith("left out:")
    }
    assert named == {
        "stoker",
        "HF datasets + greedy packer",
        "torch DataLoader, 2 workers",
        "tokenizer alone (the tokenizers package)",
        "tokenizer alone (stoker's native copy)",
    }
    assert "stoker / tokenizer alone (stoker's native copy): " in run.stdout
