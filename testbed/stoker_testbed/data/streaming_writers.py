"""The peers' own writers for `benchmarks/storage/object_store_streaming.py`: each peer reads what its documented writer
wrote, uploaded to the benchmark's S3 server.

Every writer takes a `Storage` (samples in class order), stores each sample's bytes, label and
position (``index``, so that the reader can report the order it delivered), and returns the
samples per shard (chunk, row group), from which shuffle quality counts shards per batch; or None
when the peer's package is not installed (the peer is then left out, with that reason).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stoker.storage import Storage
from stoker_testbed.servers.s3_server import S3Server

SHARD_BYTES = 64 << 20


def labelled_samples(source: Storage) -> Iterator[tuple[int, bytes, int]]:
    """``(index, bytes, label)`` for each sample of ``source``, in its stored order."""
    for index, ((_, data), label) in enumerate(zip(source.iter_sequential(), source.labels)):
        yield index, data, int(label or 0)


def upload_folder(s3: S3Server, local: Path, url: str) -> None:
    """Every file of ``local`` to ``url`` (``s3://bucket/prefix``), under its own name."""
    bucket, prefix = url[len("s3://") :].split("/", 1)
    client = s3.client()
    for path in sorted(local.iterdir()):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.name}")


def write_mosaicml(source: Storage, url: str, local: Path) -> list[int] | None:
    """MDS shards by MosaicML's ``MDSWriter`` (64 MB), uploaded by the writer itself."""
    try:
        from streaming import MDSWriter
    except ImportError:
        return None
    columns = {"data": "bytes", "label": "int", "index": "int"}
    with MDSWriter(out=(str(local), url), columns=columns, size_limit="64mb", progress_bar=False, keep_local=True) as writer:
        for index, data, label in labelled_samples(source):
            writer.write({"data": data, "label": label, "index": index})
    return [int(shard["samples"]) for shard in json.loads((local / "index.json").read_text())["shards"]]


def litdata_sample(item: tuple[int, bytes, int]) -> dict[str, Any]:
    """LitData's ``optimize`` function: one sample as the dict its chunks store (importable, as
    its spawned workers need)."""
    index, data, label = item
    return {"data": data, "label": label, "index": index}


def write_litdata(source: Storage, url: str, local: Path, s3: S3Server) -> list[int] | None:
    """LitData chunks by its ``optimize`` (64 MB chunks), uploaded under ``url``."""
    try:
        import litdata  # noqa: F401
    except ImportError:
        return None
    from stoker_testbed.data.peer_formats import litdata_optimize

    litdata_optimize(
        fn=litdata_sample, inputs=list(labelled_samples(source)), output_dir=str(local), chunk_bytes="64MB", num_workers=1, mode="overwrite"
    )
    upload_folder(s3, local, url)
    return [int(chunk["chunk_size"]) for chunk in json.loads((local / "index.json").read_text())["chunks"]]


def write_webdataset(source: Storage, url: str, local: Path, s3: S3Server) -> list[int] | None:
    """Tar shards by WebDataset's ``ShardWriter`` (64 MB), uploaded under ``url``."""
    try:
        import webdataset
    except ImportError:
        return None
    local.mkdir(parents=True, exist_ok=True)
    extension = "jpg" if source.keys[0].endswith(".jpg") else "bin"
    counts: list[int] = []
    with webdataset.ShardWriter(str(local / "shard-%06d.tar"), maxsize=SHARD_BYTES, maxcount=10**9, verbose=0) as writer:
        for index, data, label in labelled_samples(source):
            writer.write({"__key__": f"{index:09d}", extension: data, "cls": str(label).encode(), "idx": str(index).encode()})
            if writer.shard > len(counts):  # `shard` counts the shards the writer has opened
                counts.append(0)
            counts[-1] += 1
    upload_folder(s3, local, url)
    return counts


def write_huggingface_parquet(source: Storage, url: str, local: Path, s3: S3Server) -> list[int] | None:
    """Parquet files by Hugging Face ``datasets`` as the Hub stores them: ``Image`` and
    ``ClassLabel`` features, ``train-XXXXX-of-NNNNN.parquet`` files of about 500 MB (the
    ``push_to_hub`` default), its row group size for images; uploaded under ``url``. The samples
    per row group are returned (the blocks stoker streams)."""
    try:
        import datasets
        import pyarrow.parquet
    except ImportError:
        return None
    local.mkdir(parents=True, exist_ok=True)
    names = sorted({str(label) for label in source.labels})
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=names), "index": datasets.Value("int64")})
    rows = [{"image": {"bytes": data, "path": None}, "label": label, "index": index} for index, data, label in labelled_samples(source)]
    dataset = datasets.Dataset.from_list(rows, features=features)
    total = sum(len(row["image"]["bytes"]) for row in rows)
    files = max(2, -(-total // (500 << 20)))  # at least one per DataLoader worker
    for number in range(files):
        dataset.shard(files, number, contiguous=True).to_parquet(str(local / f"train-{number:05d}-of-{files:05d}.parquet"))
    upload_folder(s3, local, url)
    sizes: list[int] = []
    for path in sorted(local.glob("*.parquet")):
        metadata = pyarrow.parquet.ParquetFile(path).metadata
        sizes.extend(metadata.row_group(group).num_rows for group in range(metadata.num_row_groups))
    return sizes
