"""`stoker inspect` says which payload types a dataset holds and how many of each: a folder or
shards that mix PNGs into JPEGs are reported as such, not as JPEGs alone."""

from __future__ import annotations

from pathlib import Path

from stoker.ingest import convert_storage, format_report, inspect_storage
from stoker.storage import FileStorage
from stoker_testbed.data.images import encode, photo


def test_a_mix_of_jpegs_and_pngs_is_reported_by_type(tmp_path: Path) -> None:
    for index in range(6):
        kind = "png" if index % 3 == 0 else "jpg"
        path = tmp_path / "images" / f"c{index % 2}" / f"{index}.{kind}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode(photo(24, 16, seed=index), "PNG" if kind == "png" else "JPEG"))
    with FileStorage(tmp_path / "images") as source:
        convert_storage(source, tmp_path / "shards", progress=False)
    for path in (tmp_path / "images", tmp_path / "shards"):
        report = inspect_storage(path)
        assert report["payloads"] == {"jpg": 4, "png": 2}, report
        assert "payloads .jpg (4), .png (2)" in format_report(report)
