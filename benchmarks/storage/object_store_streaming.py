"""Streaming from an object store, side by side on the same S3 server (s3proxy) behind a latency
proxy: one epoch of raw bytes in batches of 32 (no decoding: the storage path alone), each loader
in its own process with a fresh cache.

Data: (a) small samples of 4-16 KB (tokenized documents, thumbnails), (b) JPEGs of about 100 KB.
Each loader reads what its own writer wrote:
- stoker, one ranged GET per sample, uniform shuffle (tar shards by `upload_to_s3`);
- stoker, block streaming: ``Loader(shuffle="block")``, one GET per 8 MB block;
- MosaicML Streaming 0.13: ``MDSWriter`` shards, ``StreamingDataset`` with its defaults (``py1e``
  shuffle, predownload) in a DataLoader with 2 workers;
- LitData 0.2: ``optimize`` chunks, ``StreamingDataset(shuffle=True)`` in its
  ``StreamingDataLoader`` with 2 workers;
- WebDataset 1.0: ``ShardWriter`` tar shards streamed by curl, shard shuffle and shuffle buffers,
  ``WebLoader`` with 2 workers.
(c) the JPEGs of (b) as Parquet written by Hugging Face ``datasets`` (Hub layout), read by
``datasets`` streaming (shuffle buffer, DataLoader with 2 workers) and by stoker
(``open_storage("s3://.../*.parquet")``, block shuffle over row groups).
Reported: samples/s and MB/s over the epoch (start-up included), time to first batch, peak RSS
(the process and its workers), and shuffle quality: distinct shards (blocks) per batch
and how often consecutive samples share a label, against the uniform expectation.

Then the heavy tail against the upper bound: one connection in ten 10x slower, a training step
(``--step-ms``) after each batch, and each loader's share of the bound the steps alone set.

Run:  python benchmarks/storage/object_store_streaming.py [--small 20000] [--images 2000] [--rtt-ms 0,20,50]
          [--tail-rtt-ms 0,50,150] [--step-ms 40]
      (--rtt-ms "" runs only the heavy tail)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from stoker.bench import image_folder, require_optimized_core
from stoker.ingest import upload_to_s3
from stoker.sampling import shuffle_quality
from stoker.storage import MemoryStorage, S3Storage, open_storage
from stoker_testbed.data.streaming_writers import write_huggingface_parquet, write_litdata, write_mosaicml, write_webdataset
from stoker_testbed.servers.proxy_process import ProxyProcess
from stoker_testbed.servers.s3_server import S3Server

PARQUET_METHODS = ("stoker-parquet", "datasets")
FOLDER = {"stoker": "shards", "stoker-block": "shards", "mosaicml": "mds", "litdata": "litdata", "webdataset": "wds", "datasets": "parquet"}
FOLDER["stoker-parquet"] = "parquet"
ROOT = Path(__file__).resolve().parents[2]


def small_samples(count: int) -> MemoryStorage:
    """``count`` random payloads of 4-16 KB in 10 classes, stored in class order (as a converted
    ImageFolder is): shuffling is what mixes the labels."""
    generator = np.random.default_rng(0)
    sizes = generator.integers(4 << 10, 16 << 10, size=count)
    keys = [f"c{index * 10 // count}/{index:07d}.bin" for index in range(count)]
    samples = {key: generator.integers(0, 256, size=int(size), dtype=np.uint8).tobytes() for key, size in zip(keys, sizes)}
    return MemoryStorage(samples, {key: index * 10 // count for index, key in enumerate(keys)})


def jpeg_samples(count: int, distinct: int = 2000) -> MemoryStorage:
    """``count`` JPEGs of about 100 KB in class order: ``distinct`` generated ones (generating is
    slow), repeated under new keys (the store and the loaders do not care that bytes repeat)."""
    base = open_storage(image_folder(min(count, distinct), 800, 600))
    payloads = base.read_many(list(base.keys))
    samples: dict[str, bytes] = {}
    labels: dict[str, int | float | None] = {}
    for index in range(count):
        key = base.keys[index % len(base)]
        name = f"{key.rsplit('.', 1)[0]}-{index // len(base)}.jpg"
        samples[name], labels[name] = payloads[index % len(base)], base.labels[index % len(base)]  # type: ignore[assignment]
    order = sorted(samples)
    return MemoryStorage({key: samples[key] for key in order}, {key: labels[key] for key in order})


def run_method(method: str, url: str, endpoint: str, environment: dict[str, str], step_ms: float = 0.0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="stoker-streaming-") as cache:
        command = [sys.executable, "-m", "stoker_testbed.peers.streaming_peers", method, url, endpoint, cache, str(step_ms)]
        # faulthandler: a crash of a loader shows where it happened, not only its signal.
        environment = {**os.environ, **environment, "PYTHONFAULTHANDLER": "1"}
        finished = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=environment, timeout=1800)
    if finished.returncode != 0:
        lines = [line for line in finished.stderr.strip().splitlines() if line.strip() and "Warning" not in line]
        raise RuntimeError(" | ".join(lines[-6:]) if lines else f"exit {finished.returncode}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=20_000, help="samples of 4-16 KB (the issue's full run: 200000)")
    parser.add_argument("--images", type=int, default=2_000, help="JPEGs of about 100 KB (full run: 20000)")
    parser.add_argument("--rtt-ms", default="0,20,50")
    parser.add_argument("--tail-rtt-ms", default="0,50,150", help="the heavy-tail runs (one connection in ten 10x slower)")
    parser.add_argument("--step-ms", type=float, default=40.0, help="the training step per batch of the heavy-tail runs")
    parser.add_argument("--json")
    args = parser.parse_args()
    datasets = {"(a) 4-16 KB samples": small_samples(args.small), "(b) 100 KB JPEGs": jpeg_samples(args.images)}
    rows: list[dict[str, Any]] = []
    with S3Server() as s3, tempfile.TemporaryDirectory(prefix="stoker-mds-") as scratch:
        s3.create_bucket("bench")
        environment = s3.environment()
        os.environ.update(environment)
        os.environ["S3_ENDPOINT_URL"] = s3.endpoint
        prepared = []
        for number, (name, source) in enumerate(datasets.items()):
            url = f"s3://bench/set{number}"
            upload_to_s3(source, f"{url}/shards", to="shards", shard_size=64 << 20, progress=False, **s3.options())
            with S3Storage(f"{url}/shards", block_bytes=8 << 20, **s3.options()) as storage:
                assert storage.catalog is not None
                # Shuffle quality counts shards per batch for the per-sample reader, blocks for the block reader.
                blocks = {"stoker": storage.catalog.block_sizes(), "stoker-block": storage.block_sizes()}
            local = Path(scratch) / f"set{number}"
            blocks["mosaicml"] = write_mosaicml(source, f"{url}/mds", local / "mds")
            blocks["litdata"] = write_litdata(source, f"{url}/litdata", local / "litdata", s3)
            blocks["webdataset"] = write_webdataset(source, f"{url}/wds", local / "wds", s3)
            labels = [label or 0 for label in source.labels]
            if number < len(datasets) - 1:  # the local copies are only for uploading (disk space)
                shutil.rmtree(local)
            prepared.append((name, url, blocks, labels))
            print(f"{name}: {len(source)} samples uploaded", file=sys.stderr, flush=True)
        # (c): the JPEGs of (b) as Parquet, written by Hugging Face `datasets`; blocks are row groups.
        row_groups = write_huggingface_parquet(source, f"{url}/parquet", local / "parquet", s3)
        prepared.append(("(c) JPEGs as Parquet", url, dict.fromkeys(PARQUET_METHODS, row_groups), labels))
        shutil.rmtree(local)
        for rtt in (float(value) for value in args.rtt_ms.split(",") if value):
            with ProxyProcess(s3.port, delay=rtt / 2e3) as proxy:
                endpoint = f"http://127.0.0.1:{proxy.port}"
                for name, url, blocks, labels in prepared:
                    for method in blocks:
                        if blocks.get(method) is None:
                            print(f"  {name} {rtt:.0f} ms {method}: left out (its package is not installed)")
                            continue
                        target = f"{url}/{FOLDER[method]}"
                        try:
                            result = run_method(method, target, endpoint, {**environment, "AWS_ENDPOINT_URL": endpoint})
                        except (RuntimeError, subprocess.TimeoutExpired) as error:
                            print(f"  {name} {rtt:.0f} ms {method}: failed: {error}")
                            continue
                        quality = shuffle_quality(np.asarray(result.pop("order")), blocks[method], labels, 32)
                        result.pop("labels")
                        row = {"data": name, "rtt_ms": rtt, "method": method, **result, **quality}
                        rows.append(row)
                        print(
                            f"{name:<20} {rtt:>3.0f} ms  {method:<13} {row['samples_per_second']:>7.0f} samples/s "
                            f"{row['megabytes_per_second']:>6.1f} MB/s  first {row['first_batch_seconds']:>5.2f}s  "
                            f"RSS {row['peak_rss_mb']:>5.0f} MB  shards/batch {row['blocks_per_batch']:>5.1f}  "
                            f"same label next {row['same_label_next']:.3f} (uniform {row['same_label_expected']:.3f})",
                            flush=True,
                        )
        # Heavy tail against the upper bound (the Cassandra-DALI paper: 94-96% at 150 ms): a
        # training step per batch that the data should keep up with; one connection in ten is
        # 10x slower. Data (b).
        name, url, blocks, labels = prepared[1]
        for rtt in (float(value) for value in args.tail_rtt_ms.split(",") if value):
            with ProxyProcess(s3.port, delay=rtt / 2e3, slow_fraction=0.1, slow_factor=10, seed=1) as proxy:
                endpoint = f"http://127.0.0.1:{proxy.port}"
                for method in blocks:
                    if blocks.get(method) is None:
                        continue
                    try:
                        result = run_method(
                            method, f"{url}/{FOLDER[method]}", endpoint, {**environment, "AWS_ENDPOINT_URL": endpoint}, args.step_ms
                        )
                    except (RuntimeError, subprocess.TimeoutExpired) as error:
                        print(f"  heavy tail {rtt:.0f} ms {method}: failed: {error}")
                        continue
                    result.pop("order"), result.pop("labels")
                    rows.append({"data": f"{name}, heavy tail, {args.step_ms:.0f} ms step", "rtt_ms": rtt, "method": method, **result})
                    print(
                        f"heavy tail {rtt:>3.0f} ms, step {args.step_ms:.0f} ms  {method:<13} {result['samples_per_second']:>7.0f} samples/s  "
                        f"{100 * result['upper_bound_fraction']:>5.1f}% of the upper bound",
                        flush=True,
                    )
    print()
    for name, _, _, _ in prepared:
        for rtt in sorted({row["rtt_ms"] for row in rows}):
            found = {row["method"]: row["samples_per_second"] for row in rows if row["data"] == name and row["rtt_ms"] == rtt}
            peers = {method: rate for method, rate in found.items() if not method.startswith("stoker")}
            ours = {method: rate for method, rate in found.items() if method.startswith("stoker")}
            if ours and peers:
                best, best_ours = max(peers, key=peers.__getitem__), max(ours, key=ours.__getitem__)
                print(f"{name} {rtt:.0f} ms: stoker ({best_ours}) / the best peer ({best}) = {ours[best_ours] / peers[best]:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
