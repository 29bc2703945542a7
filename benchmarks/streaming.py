"""Streaming from an object store, side by side on the same S3 server (s3proxy) behind a latency
proxy: one epoch of raw bytes in batches of 32 (no decoding: the storage path alone), each loader
in its own process with a fresh cache.

Data: (a) small samples of 4-16 KB (tokenized documents, thumbnails), (b) JPEGs of about 100 KB.
Each loader reads what its own writer wrote:
- stoker, one ranged GET per sample, uniform shuffle (tar shards by `upload_to_s3`);
- stoker, block streaming: ``Loader(shuffle="block")``, one GET per 8 MB block;
- MosaicML Streaming 0.13: ``MDSWriter`` shards, ``StreamingDataset`` with its defaults (``py1e``
  shuffle, predownload) in a DataLoader with 2 workers.
Reported: samples/s and MB/s over the epoch (start-up included), time to first batch, peak RSS
(the process and its workers), and shuffle quality: distinct shards (blocks) per batch
and how often consecutive samples share a label, against the uniform expectation.

Not yet compared (issue 17 goes on): LitData (``optimize``), WebDataset (``ShardWriter``) and
Hugging Face ``datasets`` streaming over Parquet; the heavy-tail run against the upper bound.

Run:  python benchmarks/streaming.py [--small 20000] [--images 2000] [--rtt-ms 0,20,50]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

# This file's folder comes off the path: this script is named like the peer it compares with
# (MosaicML's package is `streaming`). The repository root goes on it, for tests.support.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stoker.bench import image_folder, require_optimized_core  # noqa: E402
from stoker.sampling import shuffle_quality  # noqa: E402
from stoker.storage import MemoryStorage, S3Storage, Storage, open_storage, upload_to_s3  # noqa: E402
from tests.support.proxy_process import ProxyProcess  # noqa: E402
from tests.support.s3_server import S3Server  # noqa: E402

METHODS = ("stoker", "stoker-block", "mosaicml")
ROOT = Path(__file__).resolve().parents[1]


def small_samples(count: int) -> MemoryStorage:
    """``count`` random payloads of 4-16 KB in 10 classes, stored in class order (as a converted
    ImageFolder is): shuffling is what mixes the labels."""
    generator = np.random.default_rng(0)
    sizes = generator.integers(4 << 10, 16 << 10, size=count)
    keys = [f"c{index * 10 // count}/{index:07d}.bin" for index in range(count)]
    samples = {key: generator.integers(0, 256, size=int(size), dtype=np.uint8).tobytes() for key, size in zip(keys, sizes)}
    return MemoryStorage(samples, {key: index * 10 // count for index, key in enumerate(keys)})


def write_mosaicml(source: Storage, url: str, local: Path) -> list[int] | None:
    """``source`` as MDS shards (MosaicML's writer, 64 MB shards) uploaded to ``url``; the
    samples per shard, or None without MosaicML Streaming."""
    try:
        from streaming import MDSWriter
    except ImportError:
        return None
    columns = {"data": "bytes", "label": "int", "index": "int"}
    with MDSWriter(out=(str(local), url), columns=columns, size_limit="64mb", progress_bar=False, keep_local=True) as writer:
        for index, ((_, data), label) in enumerate(zip(source.iter_sequential(), source.labels)):
            writer.write({"data": data, "label": int(label or 0), "index": index})
    return [int(shard["samples"]) for shard in json.loads((local / "index.json").read_text())["shards"]]


def run_method(method: str, url: str, endpoint: str, environment: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="stoker-streaming-") as cache:
        command = [sys.executable, "-m", "tests.support.streaming_peers", method, url, endpoint, cache]
        finished = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **environment}, timeout=1800)
    if finished.returncode != 0:
        raise RuntimeError(finished.stderr.strip().splitlines()[-1] if finished.stderr.strip() else f"exit {finished.returncode}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=20_000, help="samples of 4-16 KB (the issue's full run: 200000)")
    parser.add_argument("--images", type=int, default=2_000, help="JPEGs of about 100 KB (full run: 20000)")
    parser.add_argument("--rtt-ms", default="0,20,50")
    parser.add_argument("--json")
    args = parser.parse_args()
    datasets = {"(a) 4-16 KB samples": small_samples(args.small), "(b) 100 KB JPEGs": open_storage(image_folder(args.images, 800, 600))}
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
            blocks["mosaicml"] = write_mosaicml(source, f"{url}/mds", Path(scratch) / str(number))
            prepared.append((name, url, blocks, [label or 0 for label in source.labels]))
            print(f"{name}: {len(source)} samples uploaded", file=sys.stderr, flush=True)
        for rtt in (float(value) for value in args.rtt_ms.split(",")):
            with ProxyProcess(s3.port, delay=rtt / 2e3) as proxy:
                endpoint = f"http://127.0.0.1:{proxy.port}"
                for name, url, blocks, labels in prepared:
                    for method in METHODS:
                        if blocks.get(method) is None:
                            print(f"  {name} {rtt:.0f} ms {method}: left out (MosaicML Streaming is not installed)")
                            continue
                        target = f"{url}/mds" if method == "mosaicml" else f"{url}/shards"
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
    print()
    for name, _, _, _ in prepared:
        for rtt in sorted({row["rtt_ms"] for row in rows}):
            found = {row["method"]: row["samples_per_second"] for row in rows if row["data"] == name and row["rtt_ms"] == rtt}
            if "stoker-block" in found and "mosaicml" in found:
                print(
                    f"{name} {rtt:.0f} ms: stoker block streaming / MosaicML Streaming = {found['stoker-block'] / found['mosaicml']:.2f}x"
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
