"""The `stoker` command end to end: convert, inspect, index, and its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stoker.cli import main, parse_size


def test_convert_inspect_round_trip(tmp_path: Path, folder, capsys) -> None:
    root, samples = folder
    assert main(["convert", str(root), str(tmp_path / "out"), "--shard-size", "10KB", "--quiet"]) == 0
    assert "verified" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "out"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "shards" and report["samples"] == len(samples) and report["shards"] >= 2
    assert report["labels"] == {"class_0": 7, "class_1": 7, "class_2": 7}
    assert main(["convert", str(root), str(tmp_path / "out.lmdb"), "--quiet"]) == 0
    assert main(["inspect", str(tmp_path / "out.lmdb")]) == 0
    text = capsys.readouterr().out
    assert "lmdb, 21 samples" in text and "caffe" in text


def test_errors_are_one_clear_line(tmp_path: Path, capsys) -> None:
    assert main(["inspect", str(tmp_path / "missing")]) == 1
    assert "missing" in capsys.readouterr().err
    bad = tmp_path / "broken.tar"
    bad.write_bytes(b"not a tar at all" * 100)
    assert main(["index", str(bad)]) == 1
    assert "broken.tar" in capsys.readouterr().err


def test_the_installed_command_runs(tmp_path: Path, folder) -> None:
    root, _ = folder
    result = subprocess.run([sys.executable, "-m", "stoker.cli", "inspect", str(root)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "folder, 21 samples" in result.stdout


def test_sizes() -> None:
    assert parse_size("256MB") == 256 << 20 and parse_size("1.5G") == int(1.5 * (1 << 30)) and parse_size("512") == 512
