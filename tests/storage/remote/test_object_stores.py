"""What every object store does, the same on each: S3 (s3proxy), Google Cloud Storage
(fake-gcs-server) and Azure Blob Storage (Azurite), each a real server on loopback.

Data is put into each bucket object by object (as the store's own tools would), then read through
`open_storage` by URL alone: an ImageFolder of objects, tar shards by ranged GETs and by block
streaming, Parquet; every sample once per epoch with its bytes and label; names that say which
store and object; the store's own request prices; errors that name the bucket.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker import Loader
from stoker.cli import main
from stoker.errors import ConfigurationError, StorageError
from stoker.ingest import convert_storage, upload_to_object_store
from stoker.loader import Reads, Sampling
from stoker.observe import read_ledger
from stoker.storage import PRICE_TABLES, AzureStorage, GCSStorage, ObjectStorage, S3Storage, open_storage
from stoker.storage.remote import ObjectUrl, parse_connection_string, parse_object_url
from stoker_testbed.data.datasets import dataset, epoch_contents
from stoker_testbed.servers.buckets import TestBucket

STORAGE_CLASS = {"s3": S3Storage, "gs": GCSStorage, "az": AzureStorage}
PRICES = {"s3": "aws-s3-standard", "gs": "gcs-standard", "az": "azure-blob-hot"}


def _truth(count: int) -> tuple[dict[str, bytes], dict[str, int]]:
    source = dataset(count)
    data = dict(zip(source.keys, source.read_many(source.keys)))
    return data, dict(zip(source.keys, source.labels))  # type: ignore[arg-type]


def test_an_image_folder_of_objects_is_listed_and_read_by_url_alone(object_bucket: TestBucket) -> None:
    data, labels = _truth(60)
    for key, payload in data.items():
        object_bucket.put(f"folder/{key}", payload)
    with open_storage(object_bucket.url("folder"), **object_bucket.options()) as storage:
        assert type(storage) is STORAGE_CLASS[object_bucket.store]
        assert isinstance(storage, ObjectStorage) and storage.layout == "objects"
        assert sorted(storage.keys) == sorted(data)
        assert storage.classes == ["class_0", "class_1", "class_2"]
        got = dict(zip(storage.keys, storage.read_many(storage.keys)))
        assert got == data
        assert {key: storage.labels[index] for index, key in enumerate(storage.keys)} == labels
        assert storage.sample_name(0) == f"{object_bucket.store}://{object_bucket.name}/folder/{storage.keys[0]}"
        assert storage.describe() == object_bucket.url("folder")


@pytest.fixture
def shard_folder(tmp_path: Path) -> Path:
    convert_storage(dataset(300), tmp_path / "shards", shard_size=60_000, progress=False, decode_check=False)
    return tmp_path / "shards"


def test_tar_shards_by_ranged_gets_every_sample_once_priced_at_the_stores_own_prices(object_bucket: TestBucket, shard_folder: Path) -> None:
    object_bucket.put_folder(shard_folder, "shards")
    truth = {key.rsplit(".", 1)[0]: value for key, value in _truth(300)[0].items()}
    with open_storage(object_bucket.url("shards"), **object_bucket.options()) as storage:
        assert isinstance(storage, ObjectStorage) and storage.layout == "shards" and len(storage.shards) > 2
        loader = Loader(storage, batch_size=32, decode=bytes, sampling=Sampling(shuffle="uniform", seed=1), reads=Reads())
        try:
            assert epoch_contents(loader, truth) == Counter(dict.fromkeys(truth, 1))
            traffic = loader.stats().storage  # type: ignore[union-attr]
        finally:
            loader.close()
    assert traffic["cost"]["prices"] == PRICE_TABLES[PRICES[object_bucket.store]].name
    assert traffic["requests"]["ranged GET"] >= len(truth)


def test_block_streaming_fetches_a_block_per_request_and_delivers_every_sample_once(object_bucket: TestBucket, shard_folder: Path) -> None:
    object_bucket.put_folder(shard_folder, "shards")
    truth = {key.rsplit(".", 1)[0]: value for key, value in _truth(300)[0].items()}
    with open_storage(object_bucket.url("shards"), block_bytes=20_000, **object_bucket.options()) as storage:
        loader = Loader(storage, batch_size=16, decode=bytes, sampling=Sampling(shuffle="block", seed=2))
        try:
            assert epoch_contents(loader, truth) == Counter(dict.fromkeys(truth, 1))
        finally:
            loader.close()
        assert storage.stats()["block_fetches"] < len(truth) / 2, "samples are served from the blocks fetched"
    with open_storage(object_bucket.url("shards"), block_bytes=20_000, **object_bucket.options()) as storage:
        storage.stream_blocks()
        assert dict(zip(storage.keys, storage.read_many(list(storage.keys)))) == truth
        blocks = storage.block_sizes()
        assert blocks is not None and storage.stats()["block_fetches"] == len(blocks) < len(truth) / 5


def test_the_node_cache_serves_the_second_read_from_local_disk(object_bucket: TestBucket, tmp_path: Path) -> None:
    data, _ = _truth(30)
    for key, payload in data.items():
        object_bucket.put(f"cached/{key}", payload)
    options = {"cache_dir": tmp_path / "cache", "cache_bytes": 10 << 20, **object_bucket.options()}
    with open_storage(object_bucket.url("cached"), **options) as storage:
        first = storage.read_many(storage.keys)
        requests = storage.stats()["requests"]
        assert storage.read_many(storage.keys) == first == [data[key] for key in storage.keys]
        assert storage.stats()["requests"] == requests == len(data) and storage.stats()["cache_hits"] == len(data)
    with open_storage(object_bucket.url("cached"), **options) as again:  # another rank of the node, later
        assert again.read_many(again.keys) == first and again.stats()["requests"] == 0


def test_the_provenance_ledger_names_where_each_sample_lives_on_the_store(
    object_bucket: TestBucket, shard_folder: Path, tmp_path: Path
) -> None:
    object_bucket.put_folder(shard_folder, "shards")
    with open_storage(object_bucket.url("shards"), **object_bucket.options()) as storage:
        loader = Loader(storage, batch_size=32, decode=bytes, sampling=Sampling(seed=3))
        loader.record_provenance(tmp_path / "ledger")
        try:
            keys = [key for batch in loader for key in batch.keys]
        finally:
            loader.close()
    table = read_ledger(tmp_path / "ledger")
    assert sorted(table.column("key").to_pylist()) == sorted(keys) and len(keys) == 300
    shards = {path.name for path in shard_folder.glob("*.tar")}
    for location, offset in zip(table.column("location").to_pylist(), table.column("offset").to_pylist()):
        assert location.startswith(f"{object_bucket.store}://{object_bucket.name}/shards/") and location.rsplit("/", 1)[1] in shards
        assert offset > 0


def test_parquet_objects_are_read_in_place(object_bucket: TestBucket, tmp_path: Path) -> None:
    pyarrow = pytest.importorskip("pyarrow")
    import pyarrow.parquet as parquet

    data, labels = _truth(40)
    table = pyarrow.table({"image": list(data.values()), "label": [labels[key] for key in data], "key": list(data)})
    buffer = io.BytesIO()
    parquet.write_table(table, buffer, row_group_size=10)
    object_bucket.put("parquet/train-00000.parquet", buffer.getvalue())
    with open_storage(object_bucket.url("parquet/train-*.parquet"), **object_bucket.options()) as storage:
        assert len(storage) == len(data)
        got = dict(zip(storage.keys, storage.read_many(storage.keys)))
        assert sorted(got.values()) == sorted(data.values())
        assert storage.sample_name(0).startswith(f"{object_bucket.store}://{object_bucket.name}/parquet/train-00000.parquet")


def test_a_missing_bucket_is_a_storage_error_naming_it(object_bucket: TestBucket) -> None:
    url = f"{object_bucket.store}://no-such-bucket-here/data"
    with pytest.raises(StorageError, match="no-such-bucket-here"):
        open_storage(url, retry=None, **object_bucket.options()).close()


def test_wrong_azure_credentials_are_refused_and_named_without_the_key(azurite_server) -> None:  # type: ignore[no-untyped-def]
    from stoker_testbed.servers.buckets import new_bucket

    bucket = new_bucket("az", azurite_server)
    bucket.put("folder/class_0/x.jpg", b"not checked")
    wrong = "A" * 86 + "=="
    with pytest.raises(StorageError) as caught:
        AzureStorage(bucket.url("folder"), account=azurite_server.account, account_key=wrong, endpoint=azurite_server.endpoint)
    assert bucket.url("folder") in str(caught.value)
    assert wrong not in str(caught.value) and azurite_server.account_key not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "store", "bucket", "prefix", "account"),
    [
        ("s3://b/p/q/", "s3", "b", "p/q", None),
        ("gs://bucket", "gs", "bucket", "", None),
        ("gcs://bucket/x", "gs", "bucket", "x", None),
        ("az://container/a/b", "az", "container", "a/b", None),
        ("azure://container/a", "az", "container", "a", None),
        ("abfss://container@myaccount.dfs.core.windows.net/a/b", "az", "container", "a/b", "myaccount"),
    ],
)
def test_each_stores_url_forms_read_the_same(url: str, store: str, bucket: str, prefix: str, account: str | None) -> None:
    location = parse_object_url(url)
    assert (location.store, location.bucket, location.prefix, location.account) == (store, bucket, prefix, account)
    assert location.name("k") == f"{store}://{bucket}/k"


@pytest.mark.parametrize("url", ["http://x/y", "gs://", "s3://b@account/x", "file:///tmp"])
def test_a_url_of_no_object_store_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_object_url(url)
    with pytest.raises(ConfigurationError):
        GCSStorage("s3://bucket/x")


def test_the_command_line_reads_each_store_with_credentials_from_the_environment(
    object_bucket: TestBucket, shard_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    object_bucket.put_folder(shard_folder, "shards")
    server = object_bucket.server
    environment = {
        "s3": lambda: server.environment(),
        "gs": lambda: server.environment(),  # STORAGE_EMULATOR_HOST, as Google's own clients read it
        "az": lambda: {"AZURE_STORAGE_CONNECTION_STRING": server.connection_string()},
    }[object_bucket.store]()
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert main(["inspect", object_bucket.url("shards"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == object_bucket.store and report["layout"] == "shards" and report["samples"] == 300
    assert report["shards"] == len(list(shard_folder.glob("*.tar")))
    printed = json.dumps(report)
    assert all(secret not in printed for secret in environment.values() if "Key" in secret or "secret" in secret.lower())


def test_converting_to_gcs_says_how_to_get_the_data_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", str(tmp_path), "gs://bucket/x", "--quiet"]) == 1
    assert "reads gs:// in place but does not write it" in capsys.readouterr().err
    assert not Path("gs:").exists()
    with pytest.raises(ConfigurationError, match="does not write it"):
        upload_to_object_store(dataset(3), "gs://bucket/x", progress=False)


@pytest.mark.parametrize("layout", ["objects", "shards"])
def test_an_upload_to_azure_reads_back_sample_for_sample_and_resumes_without_rewriting(
    azurite_server, layout: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from stoker_testbed.data.datasets import make_folder
    from stoker_testbed.servers.buckets import new_bucket

    bucket = new_bucket("az", azurite_server)
    folder = tmp_path / "folder"
    samples = make_folder(folder, classes=3, per_class=12)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite_server.connection_string())
    url = bucket.url("images")
    assert main(["convert", str(folder), url, "--to", layout, "--quiet", "--no-decode-check"]) == 0
    assert f"wrote {len(samples)} samples" in capsys.readouterr().out
    with open_storage(url) as storage:
        assert isinstance(storage, AzureStorage) and storage.layout == layout
        got = {key: (data, label) for key, data, label in zip(storage.keys, storage.read_many(storage.keys), storage.labels)}
    if layout == "objects":
        assert got == samples
    else:  # shard keys are the files' names made flat (`shard_key`): the same samples, by content
        assert sorted(got.values()) == sorted(samples.values())

    def tags() -> dict[str, str]:
        import obstore

        listed = obstore.list(azurite_server._store(bucket.name), "images", chunk_size=1000)
        return {meta["path"]: meta["e_tag"] for chunk in listed for meta in chunk if not meta["path"].endswith("dataset.json")}

    before = tags()
    with open_storage(folder) as source:
        again = upload_to_object_store(source, url, to=layout, progress=False, decode_check=False)
    assert again.samples == len(samples)
    assert tags() == before and len(before) >= (len(samples) if layout == "objects" else 2), "nothing already there is written again"


@given(st.text(max_size=80))
def test_any_text_is_an_object_url_or_a_configuration_error(text: str) -> None:
    try:
        location = parse_object_url(text)
    except ConfigurationError:
        return
    assert location.store in ("s3", "gs", "az") and location.bucket and "/" not in location.bucket
    assert parse_object_url(location.url) == ObjectUrl(location.store, location.bucket, location.prefix)


@given(st.text(max_size=120))
def test_any_connection_string_is_read_or_refused_without_echoing_it(text: str) -> None:
    try:
        parts = parse_connection_string(text)
    except ConfigurationError as error:
        assert re.fullmatch(r"part \d+ of the Azure connection string is not Key=value", str(error)), str(error)
        return
    assert all(key and key == key.strip() for key in parts)
