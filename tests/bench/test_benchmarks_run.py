"""Every benchmark is runnable from anywhere, by the command its docstring gives, and the cheap ones
run to their table here (the heavy ones have tests of their own: tests/bench/test_*_benchmark.py,
tests/torch/test_benchmark.py, tests/hosts/test_hosts_benchmark.py).

Each runs as a script from a scratch folder, so nothing but the installed packages (stoker and the
testbed) is importable: a benchmark that reached the repository by editing ``sys.path``, or a
sibling script by its folder, fails here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*/*.py"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_benchmarks_are_grouped_by_subject() -> None:
    assert len(BENCHMARKS) >= 20, BENCHMARKS
    assert not list((ROOT / "benchmarks").glob("*.py")), "a benchmark belongs in the folder of its subject"
    for folder in (ROOT / "benchmarks").iterdir():
        if folder.is_dir() and folder.name != "__pycache__":
            assert len(list(folder.glob("*.py"))) <= 15, folder


@pytest.mark.parametrize("path", BENCHMARKS, ids=_name)
def test_a_benchmark_says_how_to_run_it_and_parses_its_arguments(path: Path, tmp_path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    assert docstring, f"{_name(path)} has no docstring"
    assert f"python {_name(path)}" in docstring, f"{_name(path)}'s docstring does not give the command that runs it"
    assert "sys.path" not in path.read_text(), f"{_name(path)} edits sys.path: import stoker_testbed instead"
    done = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "usage:" in done.stdout


QUICK = {
    "images/image_decode.py": (["--count", "48", "--repeats", "1"], "stoker / Pillow"),
    "loader/pipeline_overhead.py": (["--items", "400", "--repeats", "1"], "vs spdl"),
    "loader/filter.py": (["--samples", "200000"], "stoker's filter is"),
    "loader/filter_members.py": (["--samples", "20000"], "stoker's filter is"),
    "loader/dataset_change.py": (["--samples", "100000"], "reads in the continued epoch run at"),
    "storage/node_cache_path.py": (["--samples", "640"], "a miss's own CPU"),
    "storage/node_cache_scale.py": (["--entries", "3000"], "slowest 1,000"),
    "storage/prefetch.py": (["--batches", "60", "--rtt-ms", "5"], "out of order / in order throughput"),
    "storage/formats.py": (
        ["--images", "200", "--rtt-ms", "0,20", "--formats", "MDS,TFRecord,WebDataset"],
        "left out: the tfrecord package reads local paths",
    ),
    "storage/format_scale.py": (["--samples", "20000", "--batch", "256"], "samples/s in the first tenth"),
    "images/buckets.py": (["--count", "48", "--batch", "4"], "samples repeated"),
    "images/scaling.py": (["--count", "64", "--cores", "1,2,64"], "unmeasured: 64 cores"),
    "text/packing.py": (["--documents", "200", "--speed-tokens", "200000"], "packing speed"),
    "trainers/frameworks.py": (["--count", "64", "--rounds", "1"], "| jax |"),
    # The GIL build is this interpreter; the free-threaded one is .venv-freethreaded's where make
    # built it (the table names it unmeasured otherwise).
    "loader/free_threaded.py": (["--count", "32", "--items", "100", "--repeats", "1"], "native path, GIL"),
}


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_cheap_benchmark_runs_to_its_table(name: str, tmp_path: Path) -> None:
    arguments, expected = QUICK[name]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *arguments], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert expected in done.stdout, done.stdout[-3000:]


def test_too_short_a_prefetch_run_is_refused_with_the_reason(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "storage" / "prefetch.py"), "--batches", "20"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--batches must be at least 34" in done.stderr
