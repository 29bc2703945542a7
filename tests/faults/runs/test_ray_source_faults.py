"""Ray Data's stoker source under ``on_error="skip"``: a sample that cannot be decoded is left out
of its block, the rest delivered, and a warning names it (what Ray forwards to the driver). The
block reader runs in this process; tests/ray/test_ray.py runs it on a real cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.ingest import convert_storage
from stoker.ops import ImageTransform
from stoker.storage import MemoryStorage, open_storage
from stoker_testbed.data.images import jpeg

pytest.importorskip("ray")


def test_skip_logs_each_skipped_sample(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The block reader itself, in this process: what a worker logs for a skipped sample."""
    from stoker.ray import StokerDatasource

    images = {"a/0.jpg": jpeg(40, 30, seed=1), "a/1.jpg": b"broken", "a/2.jpg": jpeg(40, 30, seed=2)}
    convert_storage(MemoryStorage(images), tmp_path / "shards", progress=False, decode_check=False)  # bad samples packed on purpose
    source = StokerDatasource(str(tmp_path / "shards"), columns=("key", "image"), transform=ImageTransform(resize=(8, 8)), on_error="skip")
    with caplog.at_level("WARNING", logger="stoker.ray"), open_storage(str(tmp_path / "shards")) as storage:
        table = source._block(storage, range(len(storage)))
    assert table.column("key").to_pylist() == ["a/0", "a/2"]  # shard keys drop the extension
    assert any("a/1" in record.getMessage() and "skipped" in record.getMessage() for record in caplog.records)
