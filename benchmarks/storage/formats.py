"""The peers' formats read in place, against each format's own loader, side by side in one run:
one epoch of the same uint8 image batches (shorter side 160, centre crop 144, batches of 64)
from the same JPEGs, each loader in a process of its own (`stoker_testbed.peers.format_peers`).

- MDS shards written by MosaicML's ``MDSWriter`` (JPEGs in a ``bytes`` column): stoker's
  `Loader` over `open_storage` vs MosaicML's ``StreamingDataset`` in a DataLoader with 2 workers;
  locally, and from an S3 server (s3proxy) behind a latency proxy at ``--rtt-ms``.
- LitData chunks written by its ``optimize`` (bytes and numbers: Arrow rows in each chunk):
  stoker vs LitData's ``StreamingDataset`` in its ``StreamingDataLoader`` with 2 workers; locally
  and from the S3 server.
- TFRecord files written by the ``tfrecord`` package: stoker vs that package's
  ``MultiTFRecordDataset`` (with its ``.idx`` files) in a DataLoader with 2 workers; locally (it
  reads paths, not URLs: left out of the remote rows, with that reason).
- ArrayRecord files of Examples written by Google's ``ArrayRecordWriter``: stoker (through the
  same reader) vs Grain's ``ArrayRecordDataSource`` in a ``MapDataset`` with ``mp_prefetch`` and 2
  workers; locally (both read local paths only).
- A Lance dataset written by ``lance.write_dataset``: stoker (through Lance's reader) vs a
  map-style dataset whose ``__getitems__`` is one Lance ``take``, in a DataLoader with 2 workers;
  locally (from a store, both would read through Lance's own object store client).
- Tar shards written by WebDataset's ``ShardWriter``, with no index: stoker with the block shuffle
  (which indexes each shard once, at its first open; on the server, block streaming) vs
  WebDataset's own pipeline (shard shuffle, a shuffle buffer,
  ``WebLoader`` with 2 workers); locally, and from a plain HTTP server (aiohttp's file handler)
  behind the latency proxy by the brace URL list (WebDataset streams each shard with ``curl``).
- A Hugging Face ``save_to_disk`` folder: stoker vs ``load_from_disk`` with a ``with_transform``
  decode in a DataLoader with 2 workers; locally (``load_from_disk`` of a URL copies the whole
  folder first: left out of the remote rows).

stoker runs twice on each dataset: its first open reads every file once to build its table (the
"first open" column: epoch time with the build), the second reads the saved table (the ratio).
Reported: samples/s, the ratio, and CPU per sample (the loader's process and its workers, from
the children's rusage), each peer's cold epoch against stoker's steady one; the page cache is
warm for all (the same files, read just before).

Run:  python benchmarks/storage/formats.py [--images 4000] [--rtt-ms 0,50] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from stoker.bench import require_optimized_core
from stoker_testbed.data.peer_formats import (
    brace_url,
    jpeg_samples,
    write_array_record,
    write_hf_disk,
    write_lance,
    write_litdata,
    write_mds,
    write_tfrecords,
    write_webdataset,
)
from stoker_testbed.servers.http_server import HttpFileServer
from stoker_testbed.servers.proxy_process import ProxyProcess
from stoker_testbed.servers.s3_server import S3Server


def run(method: str, dataset: str, endpoint: str = "", environment: dict[str, str] | None = None) -> dict[str, Any]:
    """One epoch of ``method`` in a process of its own: its JSON line, with ``cpu_seconds``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="stoker-formats-cache-") as cache:
        command = [sys.executable, "-m", "stoker_testbed.peers.format_peers", method, dataset, endpoint, cache]
        finished = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(environment or {})}, timeout=3600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        lines = [line for line in finished.stderr.strip().splitlines() if line.strip() and "Warning" not in line]
        raise RuntimeError(" | ".join(lines[-4:]) if lines else f"exit {finished.returncode}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    result["cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def attempt(method: str, dataset: str, endpoint: str = "", environment: dict[str, str] | None = None) -> dict[str, Any] | str:
    """`run` for a peer: its result, or why it could not run (left out, never a 0)."""
    try:
        return run(method, dataset, endpoint, environment)
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return f"left out: it failed ({str(error)[-300:]})"


def row(
    name: str, setting: str, peer: str, first: dict[str, Any], steady: dict[str, Any], theirs: dict[str, Any] | str, count: int
) -> dict[str, Any]:
    """One line of the table; a peer that could not run is named with its reason, never a 0."""
    for result in (first, steady, theirs):
        if isinstance(result, dict) and result["samples"] != count:
            raise RuntimeError(f"{name} {setting}: a loader delivered {result['samples']} of {count} samples")
    entry: dict[str, Any] = {
        "format": name,
        "setting": setting,
        "peer": peer,
        "stoker_first_open": count / first["seconds"],
        "stoker": count / steady["seconds"],
        "stoker_cpu_ms": 1e3 * steady["cpu_seconds"] / count,
    }
    if isinstance(theirs, str):
        entry["left_out"] = theirs
    else:
        entry.update(peer_rate=count / theirs["seconds"], peer_cpu_ms=1e3 * theirs["cpu_seconds"] / count)
        entry["ratio"] = entry["stoker"] / entry["peer_rate"]
    return entry


FORMATS = ("MDS", "LitData", "TFRecord", "datasets", "ArrayRecord", "Lance", "WebDataset")


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=4000, help="JPEGs of about 400 x 300")
    parser.add_argument("--rtt-ms", default="0,50", help="round trips to the S3 server (0: local files only)")
    parser.add_argument("--formats", default=",".join(FORMATS), help="which formats to compare")
    parser.add_argument("--json")
    args = parser.parse_args()
    unknown = set(args.formats.split(",")) - set(FORMATS)
    if unknown:
        parser.error(f"--formats: no such format {', '.join(sorted(unknown))} (choose from {', '.join(FORMATS)})")
    samples = [(payload, label) for payload, label in jpeg_samples(args.images, size=300)]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="stoker-formats-") as scratch:
        os.environ["STOKER_CACHE"] = str(Path(scratch) / "cache")  # stoker's saved tables: this run's
        # Only the formats asked for are written (each writer is its peer's library, some heavy
        # to import: the smoke run in tests/bench asks for three of the seven).
        chosen = set(args.formats.split(","))
        root = Path(scratch)
        mds = write_mds(root / "mds", samples, size_limit=64 << 20) if "MDS" in chosen else root / "mds"
        records = root / "tfrecord"
        if "TFRecord" in chosen:
            write_tfrecords(records, samples, files=8)
            from tfrecord.tools.tfrecord2idx import create_index

            for path in sorted(records.iterdir()):
                create_index(str(path), str(path) + ".idx")
        saved = write_hf_disk(root / "saved", samples, shards=8) if "datasets" in chosen else root / "saved"
        chunks = write_litdata(root / "litdata", samples, chunk_bytes="64MB", items=False) if "LitData" in chosen else root / "litdata"
        arrays = root / "array_record"
        if "ArrayRecord" in chosen:
            write_array_record(arrays, samples, files=8)
        lance_uri = write_lance(root / "train.lance", samples, rows_per_file=1024) if "Lance" in chosen else root / "train.lance"
        tars = root / "webdataset"
        tar_shards = (
            write_webdataset(tars, samples, shard_bytes=max(1 << 20, sum(len(payload) for payload, _ in samples) // 8))
            if "WebDataset" in chosen
            else []
        )
        print(f"{args.images} JPEGs written as {', '.join(sorted(chosen))}", file=sys.stderr, flush=True)
        for rtt in (float(value) for value in args.rtt_ms.split(",") if value):
            if rtt == 0:
                local = (
                    ("MDS", mds, "mosaicml"),
                    ("LitData", chunks, "litdata"),
                    ("TFRecord", records, "tfrecord"),
                    ("datasets", saved, "datasets"),
                    ("ArrayRecord", arrays, "grain"),
                    ("Lance", lance_uri, "lance"),
                    ("WebDataset", tars, "webdataset"),
                )
                for name, folder, peer in (entry for entry in local if entry[0] in args.formats.split(",")):
                    if name == "WebDataset":  # a copy: stoker's first open writes its indexes beside the shards
                        folder = shutil.copytree(folder, Path(scratch) / "webdataset-stoker")
                    method = "stoker-block" if name == "WebDataset" else "stoker"
                    first, steady = run(method, str(folder)), run(method, str(folder))
                    rows.append(row(name, "local", peer, first, steady, attempt(peer, str(folder)), len(samples)))
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
                continue
            remote = (
                ("MDS", mds, "mosaicml", None),
                ("LitData", chunks, "litdata", None),
                ("TFRecord", records, "tfrecord", "left out: the tfrecord package reads local paths, not URLs"),
                ("datasets", saved, "datasets", "left out: load_from_disk of a URL copies the whole folder first"),
            )
            if "WebDataset" in args.formats.split(","):
                with HttpFileServer() as web, ProxyProcess(web.port, delay=rtt / 2e3) as proxy:
                    for path in tar_shards:
                        web.put(f"webdataset/{path.name}", path.read_bytes())
                    url = brace_url(f"http://127.0.0.1:{proxy.port}/webdataset", tar_shards)
                    first, steady = run("stoker-block", url), run("stoker-block", url)
                    rows.append(
                        row("WebDataset", f"HTTP at {rtt:.0f} ms", "webdataset", first, steady, attempt("webdataset", url), len(samples))
                    )
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            with S3Server() as s3, ProxyProcess(s3.port, delay=rtt / 2e3) as proxy:
                s3.create_bucket("bench")
                client = s3.client()
                endpoint = f"http://127.0.0.1:{proxy.port}"
                environment = {**s3.environment(), "AWS_ENDPOINT_URL": endpoint}
                for name, folder, peer, left_out in (entry for entry in remote if entry[0] in args.formats.split(",")):
                    for path in sorted(folder.iterdir()):
                        client.upload_file(str(path), "bench", f"{folder.name}/{path.name}")
                    url = f"s3://bench/{folder.name}"
                    first, steady = run("stoker", url, endpoint, environment), run("stoker", url, endpoint, environment)
                    theirs = left_out or attempt(peer, url, endpoint, environment)
                    rows.append(row(name, f"S3 at {rtt:.0f} ms", peer, first, steady, theirs, len(samples)))
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(
        f"\n{'format':<11} {'setting':<12} {'peer':<9} {'first open/s':>12} {'stoker/s':>9} {'peer/s':>8} {'ratio':>6} {'CPU ms/sample stoker | peer':>28}"
    )
    for entry in rows:
        peer = f"{entry['peer_rate']:8.0f} {entry['ratio']:5.2f}x" if "ratio" in entry else f"{entry['left_out']}"
        cpu = f"{entry['stoker_cpu_ms']:.2f} | {entry['peer_cpu_ms']:.2f}" if "ratio" in entry else f"{entry['stoker_cpu_ms']:.2f} | -"
        print(
            f"{entry['format']:<11} {entry['setting']:<12} {entry['peer']:<9} {entry['stoker_first_open']:12.0f} {entry['stoker']:9.0f} {peer} {cpu:>28}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
