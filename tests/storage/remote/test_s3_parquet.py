"""Parquet on S3 (real s3proxy): a glob of Hugging Face-style files read by ranged GETs, equal to
the local reads, each row group fetched once under the block shuffle, cut responses retried,
and a bad footer named by its URL."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from stoker.ingest import convert_storage
from stoker.loader import Loader, Sampling
from stoker.storage import ParquetStorage, RetryPolicy, StorageError, open_storage
from stoker_testbed import LatencyProxy
from stoker_testbed.data.datasets import dataset
from stoker_testbed.servers.s3_server import S3Server

pytest.importorskip("pyarrow")

PATIENT = RetryPolicy(attempts=20, base_delay=0.01, max_delay=0.2, deadline=60)


def upload_folder(s3_server: S3Server, bucket: str, folder: Path, prefix: str) -> None:
    client = s3_server.client()
    for path in sorted(folder.rglob("*.parquet")):
        client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder)}")


@pytest.fixture
def parquet_set(s3_server: S3Server, bucket: str, tmp_path: Path) -> tuple[str, Path]:
    convert_storage(
        dataset(240), tmp_path / "local", to="parquet", shard_size=150_000, row_group_size=30_000, progress=False, decode_check=False
    )
    upload_folder(s3_server, bucket, tmp_path / "local", "ds/data")
    return f"s3://{bucket}/ds/data/*.parquet", tmp_path / "local"


def test_a_glob_on_s3_reads_what_the_local_files_hold(s3_server: S3Server, parquet_set: tuple[str, Path]) -> None:
    url, local = parquet_set
    with open_storage(url, **s3_server.options()) as remote, ParquetStorage(local) as on_disk:
        assert isinstance(remote, ParquetStorage)
        assert list(remote.keys) == list(on_disk.keys) and list(remote.labels) == list(on_disk.labels)
        assert remote.classes == on_disk.classes and remote.block_sizes() == on_disk.block_sizes()
        order = list(range(len(remote)))
        random.Random(2).shuffle(order)
        assert remote.read_indices(order) == on_disk.read_indices(order)


def test_the_block_shuffle_fetches_each_row_group_once(s3_server: S3Server, parquet_set: tuple[str, Path]) -> None:
    url, _ = parquet_set
    with open_storage(url, cache_bytes=400_000, **s3_server.options()) as storage:  # the row groups in flight, not the dataset
        keys = Counter(
            key
            for batch in Loader(storage, batch_size=16, sampling=Sampling(shuffle="block", shuffle_window=1, seed=0))
            for key in batch.keys
        )
        stats = storage.stats()
    assert keys == Counter({key: 1 for key in storage.keys})
    assert stats["row_groups_read"] == stats["row_groups"]


def test_a_prefix_of_parquet_files_points_to_the_glob(s3_server: S3Server, parquet_set: tuple[str, Path], bucket: str) -> None:
    with pytest.raises(StorageError, match=r"holds Parquet files; open them with open_storage\('s3://.*/ds/data/\*\.parquet'\)"):
        open_storage(f"s3://{bucket}/ds", **s3_server.options())


def test_responses_cut_mid_read_are_retried(s3_server: S3Server, parquet_set: tuple[str, Path]) -> None:
    url, local = parquet_set
    with LatencyProxy("127.0.0.1", s3_server.port, delay=0.005) as proxy:
        options = {**s3_server.options(), "endpoint": f"http://{proxy.address[0]}:{proxy.address[1]}"}
        with open_storage(url, retry=PATIENT, **options) as remote, ParquetStorage(local) as on_disk:
            proxy.cut_responses(3, after_bytes=5_000)
            everything = list(range(len(remote)))
            assert remote.read_indices(everything) == on_disk.read_indices(everything)
            assert proxy.cuts_left == 0


def test_a_corrupt_footer_on_s3_is_named_by_its_url(s3_server: S3Server, bucket: str, parquet_set: tuple[str, Path]) -> None:
    _, local = parquet_set
    data = bytearray(sorted(local.glob("*.parquet"))[0].read_bytes())
    data[-12:-8] = b"\xff\xff\xff\x7f"
    s3_server.client().put_object(Bucket=bucket, Key="bad/part-00000.parquet", Body=bytes(data))
    with pytest.raises(StorageError, match=rf"s3://{bucket}/bad/part-00000.parquet: not a readable Parquet file"):
        open_storage(f"s3://{bucket}/bad/*.parquet", **s3_server.options())


def test_a_text_column_on_s3_is_tokenized_as_the_local_one(s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    """FineWeb-style Parquet on S3: TokenLoader gives the same packed batches as from the local file."""
    pytest.importorskip("tokenizers")
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as parquet

    from stoker.loader import TokenLoader
    from stoker_testbed.data.text import make_corpus

    texts, tokenizer = make_corpus(tmp_path / "corpus", documents=80, files=1)
    (tmp_path / "local").mkdir()
    parquet.write_table(pa.table({"id": list(range(len(texts))), "text": texts}), tmp_path / "local" / "train.parquet", row_group_size=20)
    upload_folder(s3_server, bucket, tmp_path / "local", "fineweb")

    def batches(source: object) -> list[np.ndarray]:
        loader = TokenLoader(source, tokenizer=tokenizer, context_length=256, batch_size=2, seed=4)  # type: ignore[arg-type]
        return [batch.input_ids for batch in loader]

    url = f"s3://{bucket}/fineweb/*.parquet"
    with open_storage(url, image_column="text", label_column="", **s3_server.options()) as remote:
        from_s3 = batches(remote)
    local = batches(tmp_path / "local" / "train.parquet")
    assert len(from_s3) == len(local) and all(np.array_equal(a, b) for a, b in zip(from_s3, local))
