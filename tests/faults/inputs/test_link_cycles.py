"""Every walk of a user's dataset folder keeps one set of rules (`stoker._bounded` tree walks):
links followed, in the folder or out of it, each folder once; a link cycle, a loop of links
(ELOOP) or a dangling link named in one warning and skipped; never a traceback, a hang, or one
file listed under many paths. ImageFolder listings (the native walk), JSON Lines and Parquet
discovery (a folder or a ``**`` pattern) and `stoker inspect` alike."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.storage import FileStorage, JsonlStorage, ParquetStorage
from stoker_testbed.data.images import jpeg

ROOT = Path(__file__).resolve().parents[3]


def _looped_image_folder(root: Path) -> Path:
    """An ImageFolder of one image in one class, beside every kind of link that is no sample."""
    cat = root / "data" / "cat"
    cat.mkdir(parents=True)
    (cat / "x.jpg").write_bytes(jpeg(16, 16, seed=1))
    (cat / "up").symlink_to("..")  # a cycle: back to the dataset's folder
    (cat / "self.jpg").symlink_to("self.jpg")  # a loop of links: ELOOP
    (cat / "gone.jpg").symlink_to("nothing.jpg")  # a link to nothing
    (root / "data" / "loop").symlink_to("loop")  # a loop where class folders are looked for
    (root / "data" / "all").symlink_to(".")  # a "class" that is the dataset itself
    return root / "data"


def test_inspect_on_a_folder_with_link_loops_names_them_and_lists_each_file_once(tmp_path: Path) -> None:
    data = _looped_image_folder(tmp_path)
    done = subprocess.run([sys.executable, "-m", "stoker.cli", "inspect", str(data)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert ": folder, 1 samples" in done.stdout, done.stdout
    for name, why in (
        ("loop", "a loop of links"),
        ("self.jpg", "a loop of links"),
        ("gone.jpg", "a link to nothing"),
        ("up", "a folder already walked"),
        ("all", "a folder already walked"),
    ):
        assert f"{name}: {why}" in done.stderr, (name, done.stderr)


def test_an_image_folder_lists_each_file_once_and_warns_again_from_its_cached_listing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = _looped_image_folder(tmp_path)
    outside = tmp_path / "elsewhere" / "dog"
    outside.mkdir(parents=True)
    (outside / "y.jpg").write_bytes(jpeg(16, 16, seed=2))
    (data / "dog").symlink_to(outside)  # a class folder elsewhere: followed
    for _ in range(2):  # the listing, then the cached listing
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="stoker.storage"):
            storage = FileStorage(data)
        assert list(storage.keys) == ["cat/x.jpg", "dog/y.jpg"] and storage.classes == ["cat", "dog"]
        warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
        assert len(warnings) == 1 and "skipped 5 while listing it" in warnings[0], warnings


def _corpus(root: Path) -> Path:
    """JSON Lines files in a folder, one in a linked folder outside it, beside a cycle and a loop."""
    corpus = root / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (root / "outside").mkdir()
    for path in (corpus / "a.jsonl", corpus / "sub" / "b.jsonl", root / "outside" / "c.jsonl"):
        path.write_text('{"text": "one"}\n{"text": "two"}\n')
    (corpus / "linked").symlink_to(root / "outside")
    (corpus / "sub" / "up").symlink_to("..")
    (corpus / "sub" / "loop.jsonl").symlink_to("loop.jsonl")
    return corpus


def test_json_lines_folders_and_patterns_follow_links_once_and_name_cycles(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    corpus = _corpus(tmp_path)
    expected = [corpus / "a.jsonl", corpus / "linked" / "c.jsonl", corpus / "sub" / "b.jsonl"]
    for source in (corpus, f"{corpus}/**/*.jsonl"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="stoker.storage"):
            storage = JsonlStorage(source)
        assert storage.files == expected, (source, storage.files)
        assert len(storage) == 6, "each line once"
        warned = " ".join(record.getMessage() for record in caplog.records)
        assert "loop.jsonl: a loop of links" in warned and "up: a folder already walked" in warned, warned


def test_parquet_discovery_keeps_the_same_rules(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    (data / "part").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    expected = [data / "a.parquet", data / "more" / "c.parquet", data / "part" / "b.parquet"]
    for path in (data / "a.parquet", data / "part" / "b.parquet", tmp_path / "outside" / "c.parquet"):
        pq.write_table(pa.table({"payload": [path.name.encode()]}), path)
    (data / "more").symlink_to(tmp_path / "outside")
    (data / "part" / "up").symlink_to("..")
    (data / "part" / "self.parquet").symlink_to("self.parquet")
    for source in (data, f"{data}/**/*.parquet"):
        with ParquetStorage(source) as storage:
            assert storage.names == [str(path) for path in expected], source
            assert sorted(storage.read_many(list(storage.keys))) == [b"a.parquet", b"b.parquet", b"c.parquet"]
