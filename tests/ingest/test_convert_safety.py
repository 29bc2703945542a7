"""Conversion that cannot be mistaken: an interrupted run is refused as a dataset and resumes;
unrelated or wrong destinations are refused; verification comes before dataset.json; LMDB keeps
class names."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stoker.ingest import convert_storage, shard_key
from stoker.storage import FileStorage, LmdbStorage, StorageError, TarShardStorage, open_storage
from stoker_testbed.data.datasets import make_folder

# Converts slowly (a pause per sample), so the test can interrupt it between shards.
_SLOW_CONVERT = """
import sys, time
from stoker.storage import FileStorage, convert_storage

class Slow(FileStorage):
    def iter_sequential(self, chunk=256):
        for item in super().iter_sequential(chunk):
            time.sleep(0.01)
            yield item

convert_storage(Slow(sys.argv[1]), sys.argv[2], shard_size=6000, progress=False, decode_check=False)
"""


def test_an_interrupted_conversion_is_refused_then_resumes(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    samples = make_folder(root, classes=3, per_class=40)
    destination = tmp_path / "shards"
    process = subprocess.Popen([sys.executable, "-c", _SLOW_CONVERT, str(root), str(destination)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (destination / "shard-000002.tar").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, errors = process.communicate(timeout=60)
    assert process.returncode != 0 and "KeyboardInterrupt" in errors
    assert not (destination / "dataset.json").exists()
    finished = sorted(destination.glob("shard-*.tar"))
    assert finished, "some shards were finished before the interrupt"

    with pytest.raises(StorageError, match="partial conversion.*run the same `stoker convert` again"):
        open_storage(destination)
    inspect = subprocess.run([sys.executable, "-m", "stoker.cli", "inspect", str(destination)], capture_output=True, text=True)
    assert inspect.returncode != 0 and "partial conversion" in inspect.stderr

    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "stoker.cli",
            "convert",
            str(root),
            str(destination),
            "--shard-size",
            "6000",
            "--quiet",
            "--no-decode-check",
        ],
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(finished)} finished shards" in resumed.stderr
    with TarShardStorage(destination) as storage:
        by_key = {shard_key(key)[0]: value for key, value in samples.items()}
        assert sorted(storage.keys) == sorted(by_key)
        assert {key: (data, storage.label(key)) for key, data in storage.iter_sequential()} == by_key


def test_a_resume_with_a_changed_shard_rewrites_from_there(tmp_path: Path, folder) -> None:
    root, samples = folder
    destination = tmp_path / "shards"
    with FileStorage(root) as source:
        convert_storage(source, destination, shard_size=6000, progress=False, decode_check=False)
    # Make it look interrupted, and damage the second shard.
    (destination / "dataset.json").unlink()
    (destination / ".stoker-convert.json").write_text(
        json.dumps({"format": "stoker.convert", "source": FileStorage(root).describe(), "samples": len(samples), "shard_size": 6000})
    )
    second = destination / "shard-000001.tar"
    damaged = bytearray(second.read_bytes())
    damaged[700] ^= 0xFF
    second.write_bytes(bytes(damaged))
    with FileStorage(root) as source:
        report = convert_storage(source, destination, shard_size=6000, progress=False, decode_check=False)
    assert report.samples == len(samples)
    with TarShardStorage(destination) as storage:
        assert sorted(data for _, data in storage.iter_sequential()) == sorted(data for data, _ in samples.values())


def test_wrong_destinations_are_refused(tmp_path: Path, folder) -> None:
    root, _ = folder
    unrelated = tmp_path / "photos"
    unrelated.mkdir()
    (unrelated / "holiday.jpg").write_bytes(b"mine")
    a_file = tmp_path / "file.bin"
    a_file.write_bytes(b"x")
    done = tmp_path / "done"
    with FileStorage(root) as source:
        with pytest.raises(StorageError, match=r"photos is not empty \(it holds holiday.jpg\)"):
            convert_storage(source, unrelated, progress=False, decode_check=False)
        assert sorted(path.name for path in unrelated.iterdir()) == ["holiday.jpg"], "nothing written into it"
        with pytest.raises(StorageError, match="is a file"):
            convert_storage(source, a_file, progress=False, decode_check=False)
        convert_storage(source, done, progress=False, decode_check=False)
        with pytest.raises(StorageError, match="already holds a converted dataset"):
            convert_storage(source, done, progress=False, decode_check=False)
        with pytest.raises(StorageError, match="already exists"):
            convert_storage(source, a_file, to="lmdb", progress=False, decode_check=False)
    cli = subprocess.run(
        [sys.executable, "-m", "stoker.cli", "convert", str(root), str(a_file), "--quiet", "--no-decode-check"],
        capture_output=True,
        text=True,
    )
    assert cli.returncode != 0 and "is a file" in cli.stderr and "Traceback" not in cli.stderr


def test_verification_comes_before_the_manifest(tmp_path: Path, folder, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = folder
    destination = tmp_path / "shards"
    from stoker.ingest import _convert

    def failing(*args: object, **kwargs: object) -> None:
        raise StorageError("verification: sample 'x' reads back different bytes or label")

    monkeypatch.setattr(_convert, "_verify", failing)
    with FileStorage(root) as source, pytest.raises(StorageError, match="verification"):
        convert_storage(source, destination, progress=False, decode_check=False)
    assert not (destination / "dataset.json").exists()
    with pytest.raises(StorageError, match="partial conversion"):
        TarShardStorage(destination)


def test_lmdb_output_keeps_class_names(tmp_path: Path, folder) -> None:
    root, samples = folder
    with FileStorage(root) as source:
        convert_storage(source, tmp_path / "out.lmdb", to="lmdb", progress=False, decode_check=False)
        classes = source.classes
    with LmdbStorage(tmp_path / "out.lmdb") as storage:
        assert storage.classes == classes == ["class_0", "class_1", "class_2"]
        assert {key: (data, storage.label(key)) for key, data in storage.iter_sequential()} == samples
