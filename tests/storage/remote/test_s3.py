"""S3Storage against a real S3-compatible server (s3proxy): layouts, ingestion and resume, errors,
retries across a restart and killed connections, the local cache."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from stoker.ingest import _object_upload, upload_to_s3
from stoker.loader import Sampling
from stoker.storage import RetryPolicy, S3Storage, StorageError
from stoker_testbed import LatencyProxy
from stoker_testbed.data.datasets import dataset
from stoker_testbed.servers.s3_server import S3Server

FAST_FAILURE = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05, deadline=5)


def contents(storage) -> dict[str, tuple[bytes, int | None]]:  # type: ignore[no-untyped-def]
    return {key: (data, label) for key, data, label in zip(storage.keys, storage.read_many(storage.keys), storage.labels)}


@pytest.mark.parametrize("layout", ["objects", "shards"])
def test_upload_then_read_every_sample_with_its_label(s3_server: S3Server, bucket: str, layout: str) -> None:
    source = dataset()
    report = upload_to_s3(
        source, f"s3://{bucket}/data", to=layout, shard_size=50_000, progress=False, decode_check=False, **s3_server.options()
    )
    assert report.samples == len(source)
    with S3Storage(f"s3://{bucket}/data", **s3_server.options()) as storage:
        assert storage.layout == layout
        got = contents(storage)
    expected = {key: (data, label) for key, data, label in zip(source.keys, source.read_many(source.keys), source.labels)}
    if layout == "shards":  # shard keys drop the extension
        expected = {key.rsplit(".", 1)[0]: value for key, value in expected.items()}
    assert got == expected


def test_a_prefix_without_manifest_is_listed_as_an_image_folder(s3_server: S3Server, bucket: str) -> None:
    client = s3_server.client()
    for name in ("cat/1.jpg", "cat/2.jpg", "dog/1.jpg", "dog/notes.txt"):
        client.put_object(Bucket=bucket, Key=f"pets/{name}", Body=name.encode())
    with S3Storage(f"s3://{bucket}/pets", **s3_server.options()) as storage:
        assert list(storage.keys) == ["cat/1.jpg", "cat/2.jpg", "dog/1.jpg"]
        assert storage.classes == ["cat", "dog"]
        assert list(storage.labels) == [0, 0, 1]
        assert storage.read("dog/1.jpg") == b"dog/1.jpg"


def test_upload_resumes_without_rewriting_what_is_there(s3_server: S3Server, bucket: str) -> None:
    source = dataset(60)
    upload_to_s3(source, f"s3://{bucket}/d", progress=False, decode_check=False, **s3_server.options())
    folder = s3_server.data_dir / bucket / "d"
    lost = folder / source.keys[5]
    lost.unlink()
    kept = folder / source.keys[0]
    before = kept.stat().st_mtime_ns
    time.sleep(0.05)
    upload_to_s3(source, f"s3://{bucket}/d", progress=False, decode_check=False, **s3_server.options())
    assert lost.exists()
    assert kept.stat().st_mtime_ns == before
    with S3Storage(f"s3://{bucket}/d", **s3_server.options()) as storage:
        assert storage.read(source.keys[5]) == source.read(source.keys[5])


def test_bad_credentials_give_a_clear_error(s3_server: S3Server, bucket: str) -> None:
    upload_to_s3(dataset(5), f"s3://{bucket}/d", progress=False, decode_check=False, **s3_server.options())
    options = {**s3_server.options(), "secret_access_key": "wrong-secret"}
    with pytest.raises(StorageError, match=f"s3://{bucket}/d: access denied"):
        S3Storage(f"s3://{bucket}/d", **options)


def test_a_missing_object_is_named_and_the_rest_is_read(s3_server: S3Server, bucket: str) -> None:
    source = dataset(10)
    upload_to_s3(source, f"s3://{bucket}/d", progress=False, decode_check=False, **s3_server.options())
    (s3_server.data_dir / bucket / "d" / source.keys[3]).unlink()
    with S3Storage(f"s3://{bucket}/d", retry=FAST_FAILURE, **s3_server.options()) as storage:
        with pytest.raises(StorageError, match=source.keys[3]):
            storage.read(source.keys[3])
        got = storage.read_many(source.keys, on_error="skip")
        assert got[3] is None and all(data is not None for index, data in enumerate(got) if index != 3)
        assert [failure.sample for failure in storage.failures] == [source.keys[3]]


def test_reads_survive_a_server_restart_and_fail_clearly_when_it_stays_down() -> None:
    source = dataset(40)
    with S3Server() as server:
        server.create_bucket("restart")
        upload_to_s3(source, "s3://restart/d", progress=False, decode_check=False, **server.options())
        # The deadline alone bounds the retries: a count ran out in 14 s while a loaded machine
        # restarted the server (CI, 2 December).
        patient = RetryPolicy(attempts=None, base_delay=0.05, max_delay=0.3, deadline=60)
        with S3Storage("s3://restart/d", retry=patient, **server.options()) as storage:
            server.stop()
            restart = threading.Timer(1.0, server.start)
            restart.start()
            try:
                assert storage.read_many(source.keys) == source.read_many(source.keys)
            finally:
                restart.join()
            assert storage.stats()["retries"] > 0
        with S3Storage("s3://restart/d", retry=FAST_FAILURE, **server.options()) as storage:
            server.stop()
            with pytest.raises(StorageError, match=r"s3://restart/d/class_\d/\d+\.jpg: gave up after 3 tries"):
                storage.read(source.keys[0])


def test_reads_survive_killed_connections(s3_server: S3Server, bucket: str) -> None:
    source = dataset(200)
    upload_to_s3(source, f"s3://{bucket}/d", progress=False, decode_check=False, **s3_server.options())
    with LatencyProxy("127.0.0.1", s3_server.port, delay=0.05) as proxy:
        options = {**s3_server.options(), "endpoint": f"http://{proxy.address[0]}:{proxy.address[1]}"}
        patient = RetryPolicy(attempts=20, base_delay=0.01, max_delay=0.2, deadline=60)
        with S3Storage(f"s3://{bucket}/d", retry=patient, max_in_flight=16, **options) as storage:
            expected = source.read_many(source.keys)
            for _ in range(3):
                before = storage.stats()["retries"]
                proxy.cut_responses(5)
                assert storage.read_many(source.keys) == expected
                assert proxy.cuts_left == 0, "every cut landed on a reply in flight"
                # Each cut fails a request, which is retried (the HTTP client may also quietly
                # resend one it had not finished writing, so not one retry per cut exactly).
                assert storage.stats()["retries"] > before


def test_the_local_cache_serves_the_second_read(s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    source = dataset(30)
    upload_to_s3(source, f"s3://{bucket}/d", progress=False, decode_check=False, **s3_server.options())
    with S3Storage(f"s3://{bucket}/d", cache_dir=tmp_path / "cache", cache_bytes=10 << 20, **s3_server.options()) as storage:
        first = storage.read_many(source.keys)
        requests = storage.stats()["requests"]
        assert storage.read_many(source.keys) == first == source.read_many(source.keys)
        assert storage.stats()["requests"] == requests == len(source)
        assert storage.stats()["cache_hits"] == len(source)


@pytest.mark.parametrize(
    "manifest, message",
    [
        (b"{not json", "dataset.json: not a stoker manifest"),
        (b'{"format": "stoker.objects"}', "dataset.json: not a stoker manifest"),
        (b'{"format": "stoker.parquet"}', "unknown format 'stoker.parquet'"),
        (b'{"format": "stoker.shards", "shards": [{"name": "gone.tar"}]}', "shard gone.tar has no index gone.tar.idx"),
    ],
)
def test_a_malformed_dataset_is_named(s3_server: S3Server, bucket: str, manifest: bytes, message: str) -> None:
    s3_server.client().put_object(Bucket=bucket, Key="bad/dataset.json", Body=manifest)
    with pytest.raises(StorageError, match=message):
        S3Storage(f"s3://{bucket}/bad", **s3_server.options())


def test_a_corrupt_shard_index_is_named(s3_server: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_object_upload, "INLINE_INDEX_BYTES", 0)  # indexes too big to ride in the manifest
    upload_to_s3(dataset(20), f"s3://{bucket}/d", to="shards", progress=False, decode_check=False, **s3_server.options())
    s3_server.client().put_object(Bucket=bucket, Key="d/shard-000000.tar.idx", Body=b'{"format": "stoker.tar-index", "version": 1}')
    with pytest.raises(StorageError, match=r"shard-000000\.tar\.idx: not a valid index"):
        S3Storage(f"s3://{bucket}/d", **s3_server.options())


def test_small_indexes_ride_in_the_manifest(s3_server: S3Server, bucket: str) -> None:
    """The open reads the manifest alone: with the sidecars deleted, every sample still reads."""
    source = dataset(40)
    upload_to_s3(source, f"s3://{bucket}/d", to="shards", shard_size=20 << 10, progress=False, decode_check=False, **s3_server.options())
    client = s3_server.client()
    sidecars = [item["Key"] for item in client.list_objects_v2(Bucket=bucket, Prefix="d/")["Contents"] if item["Key"].endswith(".idx")]
    assert len(sidecars) > 1
    for key in sidecars:
        client.delete_object(Bucket=bucket, Key=key)
    with S3Storage(f"s3://{bucket}/d", **s3_server.options()) as storage:
        assert storage.layout == "shards" and len(storage) == len(source)
        assert storage.read_many(list(storage.keys)) == source.read_many(source.keys)
        assert list(storage.labels) == list(source.labels)


def test_a_corrupt_index_in_the_manifest_is_named(s3_server: S3Server, bucket: str) -> None:
    upload_to_s3(dataset(20), f"s3://{bucket}/d", to="shards", progress=False, decode_check=False, **s3_server.options())
    client = s3_server.client()
    manifest = json.loads(client.get_object(Bucket=bucket, Key="d/dataset.json")["Body"].read())
    manifest["shards"][0]["index"] = {"format": "stoker.tar-index", "version": 1}
    client.put_object(Bucket=bucket, Key="d/dataset.json", Body=json.dumps(manifest).encode())
    with pytest.raises(StorageError, match=r"dataset\.json \(the index of shard-000000\.tar\): not a valid index"):
        S3Storage(f"s3://{bucket}/d", **s3_server.options())


def test_a_corrupted_shard_object_fails_its_crc_and_names_the_sample(s3_server: S3Server, bucket: str) -> None:
    source = dataset(30)
    upload_to_s3(source, f"s3://{bucket}/data", to="shards", shard_size=1 << 20, progress=False, decode_check=False, **s3_server.options())
    with S3Storage(f"s3://{bucket}/data", **s3_server.options()) as storage:
        shard = storage.shards[0]
        victim = storage.keys[4]
        _, (offset, size) = storage.catalog.span(4)  # type: ignore[union-attr]
        client = s3_server.client()
        name = f"data/{shard.shard.name}"
        body = bytearray(client.get_object(Bucket=bucket, Key=name)["Body"].read())
        body[offset + size // 2] ^= 0xFF  # one flipped byte, same size, same headers
        client.put_object(Bucket=bucket, Key=name, Body=bytes(body))
        got = storage.read_many(storage.keys, on_error="skip")
        assert [key for key, data in zip(storage.keys, got) if data is None] == [victim]
        [failure] = storage.failures
        assert "CRC-32 mismatch" in str(failure.error) and victim in str(failure.error)
    with S3Storage(f"s3://{bucket}/data", verify=False, **s3_server.options()) as unverified:
        assert unverified.read(victim) != source.read(victim + ".jpg")


def test_image_text_shards_deliver_their_extra_members(s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    import json

    webdataset = pytest.importorskip("webdataset")
    from stoker.loader import Loader
    from stoker.storage.local import build_index, write_index

    shard = tmp_path / "shard-000000.tar"
    with webdataset.TarWriter(str(shard)) as writer:
        for index in range(9):
            writer.write(
                {
                    "__key__": f"{index:04d}",
                    "jpg": b"\xff\xd8\xff" + bytes([index]),
                    "txt": f"caption {index}".encode(),
                    "json": json.dumps({"n": index}).encode(),
                }
            )
    client = s3_server.client()
    client.put_object(Bucket=bucket, Key="laion/shard-000000.tar", Body=shard.read_bytes())
    client.put_object(Bucket=bucket, Key="laion/shard-000000.tar.idx", Body=write_index(build_index(shard)).read_bytes())  # version 3 bytes
    client.put_object(
        Bucket=bucket, Key="laion/dataset.json", Body=json.dumps({"format": "stoker.shards", "shards": [{"name": shard.name}]}).encode()
    )
    with S3Storage(f"s3://{bucket}/laion", **s3_server.options()) as storage:
        loader = Loader(storage, batch_size=4, decode=lambda data: data[3], extra=("txt", "json"), sampling=Sampling(seed=1))
        seen = {key: (value, extra) for batch in loader for key, value, extra in zip(batch.keys, batch.data, batch.extra)}
        assert seen == {f"{index:04d}": (index, {"txt": f"caption {index}", "json": {"n": index}}) for index in range(9)}
        assert isinstance(storage.try_read_members([0], ["wav"])[0], StorageError)
        filtered = Loader(storage, batch_size=4, decode=lambda data: data[3], sampling=Sampling(where="n >= 5"))  # the json members' field
        assert sorted(key for batch in filtered for key, padding in zip(batch.keys, batch.padding) if not padding) == [
            "0005",
            "0006",
            "0007",
            "0008",
        ]
