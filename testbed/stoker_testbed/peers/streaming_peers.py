"""The loaders of `benchmarks/storage/object_store_streaming.py`, each run for one epoch in its own process (so peak RSS
and the peers' shared memory are their own), printing one JSON line.

    python -m stoker_testbed.peers.streaming_peers METHOD URL ENDPOINT CACHE_DIR [STEP_MS]

With STEP_MS, each batch is followed by a training step of that many milliseconds (a sleep, as a
GPU step leaves the CPU to the loader), and the result says how close the run came to the bound
the steps alone set (``upper_bound_fraction``: steps' time / wall time).

- ``stoker``: `Loader` over `S3Storage`, uniform shuffle, one ranged GET per sample.
- ``stoker-block``: the same with ``shuffle="block"``: one GET per block, shuffled by blocks.
- ``mosaicml``: MosaicML Streaming's `StreamingDataset` (its defaults: ``py1e`` shuffle,
  predownload) over MDS shards written by its ``MDSWriter``, in a PyTorch DataLoader with 2
  workers, a fresh local cache.
- ``litdata``: LitData's `StreamingDataset` (shuffle on, its defaults) over chunks written by its
  ``optimize``, in its `StreamingDataLoader` with 2 workers, a fresh cache; the endpoint through
  its ``storage_options``.
- ``webdataset``: WebDataset over tar shards written by its ``ShardWriter``: the shards streamed
  by ``curl`` (its handler for http URLs; presigned GETs, as ``aws s3 cp`` is not installed),
  shard shuffle plus a 1,000-sample shuffle buffer in each worker and again after batching
  across workers, in its `WebLoader` with 2 workers (its README's recipe).
- ``datasets``: Hugging Face ``datasets`` streaming over the Parquet files it wrote
  (``load_dataset("parquet", streaming=True)`` through s3fs, the images undecoded),
  ``shuffle(buffer_size=1000)`` (its default buffer), in a DataLoader with 2 workers.
- ``stoker-parquet``: `Loader` over the same Parquet files (`open_storage` on the glob),
  ``shuffle="block"``: one row group a block.

Each records every batch's arrival and the storage index and label of every sample, so that the
parent computes the same shuffle-quality numbers for all of them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator

from stoker.loader import Sampling

BATCH = 32
BLOCK_BYTES = 8 << 20


def stoker_batches(url: str, endpoint: str, block: bool) -> Iterator[tuple[list[bytes], list[int], list[int]]]:
    from stoker.loader import Loader
    from stoker.storage import S3Storage

    storage = S3Storage(url, endpoint=endpoint, block_bytes=BLOCK_BYTES)
    loader = Loader(storage, batch_size=BATCH, sampling=Sampling(shuffle="block" if block else "uniform", seed=0))
    for batch in loader:
        yield batch.data, [storage.index_of(key) for key in batch.keys], batch.labels.tolist()


def mosaicml_batches(url: str, cache: str) -> Iterator[tuple[list[bytes], list[int], list[int]]]:
    import torch
    from streaming import StreamingDataset

    dataset = StreamingDataset(remote=url, local=cache, shuffle=True, shuffle_seed=0, batch_size=BATCH)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=2, collate_fn=lambda samples: samples)
    for samples in loader:
        yield [sample["data"] for sample in samples], [sample["index"] for sample in samples], [sample["label"] for sample in samples]


def litdata_batches(url: str, endpoint: str, cache: str) -> Iterator[tuple[list[bytes], list[int], list[int]]]:
    from litdata import StreamingDataLoader, StreamingDataset
    from litdata.streaming import downloader

    # LitData 0.2.76 downloads chunks through obstore with client options that lack allow_http,
    # so it refuses our loopback s3proxy (plain http; an https endpoint would not need this).
    # Adding that one option keeps its own fast path; workers inherit it (fork).
    downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True  # type: ignore[index]

    options = {
        "endpoint_url": endpoint,
        "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
    }
    dataset = StreamingDataset(url, cache_dir=cache, shuffle=True, seed=0, storage_options=options)
    loader = StreamingDataLoader(dataset, batch_size=BATCH, num_workers=2, collate_fn=lambda samples: samples)
    for samples in loader:
        yield [sample["data"] for sample in samples], [sample["index"] for sample in samples], [sample["label"] for sample in samples]


def stoker_parquet_batches(url: str, endpoint: str) -> Iterator[tuple[list[bytes], list[int], list[int]]]:
    from stoker.loader import Loader
    from stoker.storage import open_storage

    storage = open_storage(f"{url}/*.parquet", endpoint=endpoint)
    loader = Loader(storage, batch_size=BATCH, sampling=Sampling(shuffle="block", seed=0))
    for batch in loader:
        yield batch.data, [storage.index_of(key) for key in batch.keys], batch.labels.tolist()


def presigned_urls(url: str, endpoint: str) -> list[str]:
    """A presigned GET URL for each object under ``url`` (``s3://bucket/prefix``), by name."""
    import boto3

    bucket, prefix = url[len("s3://") :].split("/", 1)
    client = boto3.client("s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "us-east-1"))
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/")["Contents"]
    names = sorted(item["Key"] for item in listed)
    return [client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": name}, ExpiresIn=7200) for name in names]


def webdataset_batches(url: str, endpoint: str) -> Iterator[tuple[list[bytes], list[int], list[int]]]:
    import webdataset

    shards = presigned_urls(url, endpoint)
    dataset = (
        webdataset.WebDataset(shards, shardshuffle=len(shards), seed=0, nodesplitter=webdataset.split_by_node)
        .shuffle(1000)
        .to_tuple("jpg;bin", "idx", "cls")
        .batched(BATCH)  # its default collation: columns, which `unbatched` turns back into samples
    )
    loader = webdataset.WebLoader(dataset, batch_size=None, num_workers=2).unbatched().shuffle(1000).batched(BATCH, collation_fn=list)
    for samples in loader:
        yield [sample[0] for sample in samples], [int(sample[1]) for sample in samples], [int(sample[2]) for sample in samples]


def datasets_batches(url: str, endpoint: str) -> Iterator[tuple[list[bytes], list[int], list[int]]]:
    import datasets
    import torch

    options = {
        "key": os.environ["AWS_ACCESS_KEY_ID"],
        "secret": os.environ["AWS_SECRET_ACCESS_KEY"],
        "client_kwargs": {"endpoint_url": endpoint},
    }
    dataset = datasets.load_dataset("parquet", data_files=f"{url}/*.parquet", split="train", streaming=True, storage_options=options)
    dataset = dataset.cast_column("image", datasets.Image(decode=False)).shuffle(seed=0, buffer_size=1000)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=2, collate_fn=lambda samples: samples)
    for samples in loader:
        yield (
            [sample["image"]["bytes"] for sample in samples],
            [sample["index"] for sample in samples],
            [sample["label"] for sample in samples],
        )


def main() -> None:
    method, url, endpoint, cache = sys.argv[1:5]
    step = float(sys.argv[5]) / 1e3 if len(sys.argv) > 5 else 0.0
    os.environ["S3_ENDPOINT_URL"] = os.environ["AWS_ENDPOINT_URL"] = endpoint  # MosaicML's (boto3) endpoint override
    if method == "mosaicml":
        batches = mosaicml_batches(url, cache)
    elif method == "litdata":
        batches = litdata_batches(url, endpoint, cache)
    elif method == "webdataset":
        batches = webdataset_batches(url, endpoint)
    elif method == "datasets":
        batches = datasets_batches(url, endpoint)
    elif method == "stoker-parquet":
        batches = stoker_parquet_batches(url, endpoint)
    else:
        batches = stoker_batches(url, endpoint, block=method == "stoker-block")
    from stoker.bench import PeakMemory

    started = time.perf_counter()
    first = 0.0
    samples = payload = 0
    order: list[int] = []
    labels: list[int] = []
    steps = 0
    with PeakMemory() as peak:
        for data, indices, batch_labels in batches:
            if step:
                time.sleep(step)
                steps += 1
            first = first or time.perf_counter() - started
            samples += len(data)
            payload += sum(len(item) for item in data)
            order.extend(int(index) for index in indices)
            labels.extend(int(label) for label in batch_labels)
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "samples_per_second": samples / seconds,
                "megabytes_per_second": payload / seconds / 1e6,
                "first_batch_seconds": first,
                "peak_rss_mb": peak.megabytes,  # this process and its workers
                "samples": samples,
                "upper_bound_fraction": steps * step / seconds if step else None,
                "order": order,
                "labels": labels,
            }
        )
    )


if __name__ == "__main__":
    main()
