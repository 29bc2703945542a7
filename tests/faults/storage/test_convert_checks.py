"""`stoker convert` packs only what a Loader can use: empty files and images that do not decode
are left out and listed with why (never packed and reported as verified), in every output
format, from the Python API and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.cli import main
from stoker.ingest import convert_storage
from stoker.storage import FileStorage, StorageError, open_storage

from ..conftest import BAD_FILES, make_images


@pytest.mark.parametrize("to, name", [("shards", "shards"), ("lmdb", "out.lmdb"), ("parquet", "out.parquet")])
def test_bad_images_are_left_out_and_listed(tmp_path: Path, to: str, name: str) -> None:
    good = make_images(tmp_path / "images", count=12, bad=BAD_FILES)
    with FileStorage(tmp_path / "images") as source:
        report = convert_storage(source, tmp_path / name, to=to, progress=False)
    assert sorted(key for key, _ in report.skipped) == sorted(BAD_FILES)
    reasons = dict(report.skipped)
    assert "empty" in reasons["c0/empty.jpg"] and "c1/truncated.jpg" in reasons["c1/truncated.jpg"]
    assert report.samples == len(good) and report.checked == f"{len(good)} images decoded"
    with open_storage(tmp_path / name) as written:
        assert len(written) == len(good)


def test_without_the_check_every_file_is_packed_and_the_report_says_bytes_only(tmp_path: Path) -> None:
    good = make_images(tmp_path / "images", count=6, bad=BAD_FILES)
    with FileStorage(tmp_path / "images") as source:
        report = convert_storage(source, tmp_path / "shards", progress=False, decode_check=False)
    assert report.samples == len(good) + len(BAD_FILES) and report.skipped == [] and report.checked == "bytes only"


def test_a_source_with_nothing_usable_is_refused_by_name(tmp_path: Path) -> None:
    make_images(tmp_path / "images", count=0, bad=BAD_FILES)
    with FileStorage(tmp_path / "images") as source, pytest.raises(StorageError, match="nothing to convert: all 3 samples"):
        convert_storage(source, tmp_path / "shards", progress=False)


def test_the_cli_names_what_it_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_images(tmp_path / "images", count=6, bad=BAD_FILES)
    assert main(["convert", str(tmp_path / "images"), str(tmp_path / "shards"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "checked before packing: 6 images decoded" in out and "left out 3 samples that cannot be used" in out
    for key in BAD_FILES:
        assert f"  - {key}: " in out
