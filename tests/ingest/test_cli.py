"""The `stoker` command end to end: convert, inspect, index, and its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stoker.cli import main, parse_size


def test_convert_inspect_round_trip(tmp_path: Path, folder, capsys) -> None:
    root, samples = folder
    assert main(["convert", str(root), str(tmp_path / "out"), "--shard-size", "10KB", "--quiet", "--no-decode-check"]) == 0
    assert "verified" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "out"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "shards" and report["samples"] == len(samples) and report["shards"] >= 2
    assert report["labels"] == {"class_0": 7, "class_1": 7, "class_2": 7}
    assert main(["convert", str(root), str(tmp_path / "out.lmdb"), "--quiet", "--no-decode-check"]) == 0
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
    assert parse_size("1.5GiB") == int(1.5 * (1 << 30)) and parse_size("64 KiB") == 64 << 10


def test_cli_conventions(tmp_path: Path, folder) -> None:
    root, _ = folder

    def run(*arguments: str, **options) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
        return subprocess.run([sys.executable, "-m", "stoker.cli", *arguments], capture_output=True, text=True, timeout=120, **options)

    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("stoker 0.") and "optimized" in version.stdout
    for command in ("bench", "convert", "split"):
        assert "(default: " in run(command, "--help").stdout, command
    assert "(default: 256MB)" in run("convert", "--help").stdout.replace("\n", " ").replace("  ", " ")
    wrong = run("convert", str(root), str(tmp_path / "out"), "--shard-size", "12XB")
    assert wrong.returncode == 2 and "12XB: expected a size like 256MB or 1.5GiB" in wrong.stderr
    # A reader that went away (`| head -1`) ends the command quietly, without a traceback.
    process = subprocess.Popen(
        [sys.executable, "-m", "stoker.cli", "inspect", str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # closed before the command writes: its first write fails
    errors = process.stderr.read()
    assert process.wait(timeout=120) == 141
    assert "Traceback" not in errors and "BrokenPipe" not in errors, errors
