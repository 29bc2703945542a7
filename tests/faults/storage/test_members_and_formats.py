"""The ways a sample can fail that WebDataset conventions add: a missing or corrupted extra member,
a corrupt WebP, a JSON label that is not JSON, a json member a filter cannot read (damaged, a
store down for good). Each bad sample is named, counted in the
Loader's failures and stats, never delivered; bad input at open is one clear error."""

from __future__ import annotations

import io
import json
import logging
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stoker import Loader
from stoker.errors import ConfigurationError, SampleError, StorageUnavailableError
from stoker.loader import FailurePolicy, Sampling
from stoker.ops import ImageTransform
from stoker.storage import RetryPolicy, S3Storage, ShardError, TarShardStorage
from stoker.storage.local import build_index, write_index
from stoker_testbed.availability import started
from stoker_testbed.servers.s3_server import S3Server

TRANSFORM = ImageTransform(resize=(8, 8))


def _image(value: int, kind: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(buffer, kind)
    return buffer.getvalue()


def _shard(path: Path, samples: list[dict[str, bytes]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as archive:
        for number, members in enumerate(samples):
            for extension, data in members.items():
                info = tarfile.TarInfo(f"s{number:03d}.{extension}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    write_index(build_index(path, checksums=True))
    return path


def _flip_inside(path: Path, member: str) -> None:
    """Flip one byte of ``member``'s data in place (same size, same headers)."""
    with tarfile.open(path) as archive:
        info = archive.getmember(member)
    data = bytearray(path.read_bytes())
    data[info.offset_data] ^= 0xFF
    path.write_bytes(bytes(data))


def test_missing_and_corrupted_extra_members_are_named_counted_and_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    samples = [{"png": _image(index), "txt": f"caption {index}".encode()} for index in range(24)]
    del samples[5]["txt"]
    shard = _shard(tmp_path / "shard.tar", samples)
    _flip_inside(shard, "s011.txt")
    with TarShardStorage(shard) as storage:
        with pytest.raises(SampleError, match=r"s005.*no 'txt' member|s011.*CRC-32"):
            list(Loader(storage, batch_size=8, transform=TRANSFORM, extra=("txt",), sampling=Sampling(seed=1)))
        loader = Loader(
            storage,
            batch_size=8,
            transform=TRANSFORM,
            extra=("txt",),
            sampling=Sampling(seed=1),
            failure_policy=FailurePolicy(on_error="skip", max_bad_samples=None),
        )
        with caplog.at_level(logging.WARNING, logger="stoker.loader"):
            batches = list(loader)
    failures = {failure.sample: failure for failure in loader.failures}
    assert sorted(failures) == ["s005", "s011"]
    assert "no 'txt' member" in failures["s005"].error and "CRC-32 mismatch" in failures["s011"].error
    assert all(failure.stage == "fetch" and failure.action.startswith("replaced") for failure in failures.values())
    stats = loader.stats()
    assert stats is not None and sum(stats.sample_failures.values()) == 2
    assert "2 bad sample(s)" in caplog.text, "the end-of-epoch warning names them"
    delivered = [(key, extra["txt"]) for batch in batches for key, extra in zip(batch.keys, batch.extra or [])]
    assert all(key not in failures for key, _ in delivered), "a bad sample is never delivered"
    assert all(text == f"caption {int(key[1:])}" for key, text in delivered), "every caption is its own sample's"
    assert sum(batch.replaced.sum() for batch in batches) == 2


def test_a_corrupt_webp_is_a_named_decode_failure(tmp_path: Path) -> None:
    samples = [{"webp": _image(index * 10, "WEBP"), "cls": b"0"} for index in range(12)]
    samples[3]["webp"] = samples[3]["webp"][:40]  # a truncated file
    with TarShardStorage(_shard(tmp_path / "shard.tar", samples)) as storage:
        loader = Loader(
            storage,
            batch_size=4,
            transform=TRANSFORM,
            failure_policy=FailurePolicy(on_error="zero", max_bad_samples=None),
            sampling=Sampling(shuffle="none"),
        )
        batches = list(loader)
    [failure] = loader.failures
    assert failure.sample == "s003" and failure.stage == "decode" and "WebP" in failure.error
    invalid = [key for batch in batches for key, valid in zip(batch.keys, batch.valid) if not valid]
    assert invalid == ["s003"], "the zero-filled slot is marked invalid, the rest is real data"


def test_a_json_label_that_is_not_json_names_the_member(tmp_path: Path) -> None:
    samples = [{"png": _image(1), "json": json.dumps({"label": 2}).encode()}, {"png": _image(2), "json": b"{not json"}]
    shard = _shard(tmp_path / "shard.tar", samples)
    with pytest.raises(ShardError, match=r"s001\.json.*not valid JSON"):
        TarShardStorage(shard, label_key="label")
    with TarShardStorage(shard) as storage:  # without label_key the member is never parsed
        assert len(storage) == 2


def test_a_json_member_damaged_stops_a_filter_with_its_sample_named(tmp_path: Path) -> None:
    # One member's bytes changed after the shard was indexed (its CRC-32 fails): the filter cannot be
    # worked out over the whole dataset, and says which sample, rather than keep what it could read.
    path = _shard(tmp_path / "a.tar", [{"bin": b"x", "json": json.dumps({"n": number}).encode()} for number in range(12)])
    _flip_inside(path, "s010.json")
    with (
        TarShardStorage(path) as storage,
        pytest.raises(ConfigurationError, match=r"1 of 12 samples' json members cannot be read, the first 's010'"),
    ):
        Loader(storage, batch_size=4, sampling=Sampling(where="n >= 5"))


def test_a_store_down_while_a_filter_reads_json_members_is_the_outage_not_a_bad_filter(tmp_path: Path) -> None:
    server = started(S3Server(), "the S3 test server")
    try:
        server.create_bucket("meta")
        shard = _shard(tmp_path / "shard-000000.tar", [{"bin": b"x", "json": json.dumps({"n": number}).encode()} for number in range(9)])
        client = server.client()
        client.put_object(Bucket="meta", Key="d/shard-000000.tar", Body=shard.read_bytes())
        client.put_object(Bucket="meta", Key="d/shard-000000.tar.idx", Body=Path(f"{shard}.idx").read_bytes())
        manifest = {"format": "stoker.shards", "shards": [{"name": shard.name}]}
        client.put_object(Bucket="meta", Key="d/dataset.json", Body=json.dumps(manifest).encode())
        with S3Storage("s3://meta/d", retry=RetryPolicy(deadline=3.0, max_delay=0.5), **server.options()) as storage:
            server.kill()
            with pytest.raises(StorageUnavailableError):
                Loader(storage, batch_size=4, sampling=Sampling(where="n >= 5"))
    finally:
        server.stop()
