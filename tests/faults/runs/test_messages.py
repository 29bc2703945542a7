"""What a user meets when they get something wrong: each mistake is one clear error that says what
was expected, never a raw TypeError or UnicodeDecodeError from deep inside."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pytest

from stoker import Loader
from stoker.bench import make_jpegs
from stoker.ingest import upload_to_s3
from stoker.observe import write_report
from stoker.ops import ImageTransform
from stoker.storage import MemoryStorage, S3Storage, StorageClosedError
from stoker_testbed.data.datasets import unique
from stoker_testbed.servers.s3_server import S3Server


def _memory(count: int = 40) -> MemoryStorage:
    return MemoryStorage({f"k{index}": index.to_bytes(4, "little") for index in range(count)})


def test_a_state_that_is_not_a_loader_state_says_what_is_expected() -> None:
    loader = Loader(_memory(), batch_size=4)
    with pytest.raises(ValueError, match=r"not a Loader state: expected what Loader.state_dict\(\) returns .*got \['foo'\]"):
        loader.load_state_dict({"foo": 1})
    with pytest.raises(ValueError, match="version 7: this stoker reads version 1"):
        loader.load_state_dict({"version": 7, "sampler": {}, "batch_size": 4})


def test_to_device_on_batches_of_lists_says_to_use_a_transform() -> None:
    pytest.importorskip("torch")
    from stoker.device import to_device

    loader = Loader(_memory(), batch_size=4, decode=lambda data: np.frombuffer(data, np.int32))
    with pytest.raises(TypeError, match="give the Loader a transform"):
        next(iter(to_device(loader, "cpu")))


def test_a_report_of_a_file_that_is_not_a_run_says_so(tmp_path: Path) -> None:
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(make_jpegs(1, 32, 24)[0])
    with pytest.raises(ValueError, match="photo.jpg: not a stoker bench run"):
        write_report(photo)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ValueError, match="list.json: not a stoker bench run"):
        write_report(listed)


def test_closing_a_storage_under_a_running_loader_says_so_at_once(s3_server: S3Server, caplog: pytest.LogCaptureFixture) -> None:
    bucket = unique("bucket-")
    s3_server.create_bucket(bucket)
    # Enough batches that reads are still ahead when the storage closes: with 12, the
    # prefetcher could have read them all by the second batch, and the epoch ended without error.
    jpegs = make_jpegs(480, 64, 48)
    samples = MemoryStorage(
        {f"c{index % 2}/{index:03d}.jpg": data for index, data in enumerate(jpegs)},
        {f"c{index % 2}/{index:03d}.jpg": index % 2 for index in range(480)},
    )
    upload_to_s3(samples, f"s3://{bucket}/d", progress=False, **s3_server.options())
    storage = S3Storage(f"s3://{bucket}/d", **s3_server.options())
    caplog.set_level(logging.ERROR, logger="stoker")
    loader = Loader(storage, batch_size=8, transform=ImageTransform(resize=(16, 16)))
    delivered, closed_at = 0, 0.0
    with pytest.raises(StorageClosedError, match="closed while it was still being read"):
        for _batch in loader:
            delivered += 1
            if delivered == 2:
                storage.close()
                closed_at = time.monotonic()
    # Said once, to the caller: no ERROR traceback logged beside the exception.
    assert not [record for record in caplog.records if record.exc_info], [record.getMessage() for record in caplog.records]
    # Batches decoded before the close are real data and still come; then the error, at once.
    assert delivered >= 2 and closed_at > 0


def test_stoker_bench_names_the_bad_samples_it_met(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stoker.cli import main

    from ..conftest import BAD_FILES, make_images

    make_images(tmp_path / "images", count=30, bad=BAD_FILES)
    assert main(["bench", str(tmp_path / "images"), "--duration", "1", "--no-peers", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"bad samples: {len(BAD_FILES)} (" in out, out[-2000:]
    for key in BAD_FILES:
        assert sum(line.startswith(f"  - {key} (") for line in out.splitlines()) == 1, "each bad file named once"
