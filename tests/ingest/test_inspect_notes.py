"""`stoker inspect` shows what opening a Parquet dataset notes once at INFO: the columns a read
leaves out and pages written without checksums (pyarrow's and ``datasets``' default), every time
it is run, while the open itself warns of neither; a file written with checksums and no other
column gets no note."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from stoker.ingest import format_report, inspect_storage

pa = pytest.importorskip("pyarrow")
parquet = pytest.importorskip("pyarrow.parquet")


def notes(path: Path) -> list[str]:
    return [line for line in format_report(inspect_storage(path)).splitlines() if line.startswith("  note: ")]


def test_inspect_shows_the_notes_an_open_says_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    table = pa.table({"image": [bytes([index]) * 8 for index in range(6)], "label": [0, 1, 2, 0, 1, 2], "text": list("abcdef")})
    parquet.write_table(table, tmp_path / "plain.parquet")
    caplog.set_level(logging.INFO, logger="stoker")
    for _ in range(2):  # every run shows them: the once-per-process rule is the log's, not inspect's
        shown = notes(tmp_path / "plain.parquet")
        assert len(shown) == 2, shown
        assert "not read: text" in shown[0] and "carry no checksums" in shown[1] and "write_page_checksum=True" in shown[1]
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING], "notes, not warnings"
    parquet.write_table(table.drop(["text"]), tmp_path / "checked.parquet", write_page_checksum=True)
    assert notes(tmp_path / "checked.parquet") == []
