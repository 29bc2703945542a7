"""Network storage side by side: 100 KB JPEGs in an S3 server (s3proxy) and in Cassandra 5.0, behind
a latency proxy at 0/20/50/150 ms round trip. Loaders compared (raw bytes in batches of 32; no
decoding, so the storage path alone is measured), each epoch after epoch for ``--seconds``:

- stoker: `Loader` over `S3Storage` / `CassandraStorage` (per-sample out-of-order prefetch),
- PyTorch DataLoader, 2 workers, map-style Dataset: boto3 GET (or driver execute) per sample,
- ConcurrentDataloader-style: the same DataLoader, every sample of a batch fetched at once from
  a thread pool in each worker (the within-batch concurrency of the paper).

Then stoker out of order vs in order (with and without hedging stalled requests) under a heavy
tail (one S3 connection in ten 10x slower):
after a warm-up epoch (slow start), throughput over whole epochs, p50/p99 time between batches
inside epochs, and the cost of each epoch boundary (the last batch waits for stragglers that
nothing is left to replace) on its own.
Servers, data and proxy are made by the script; the proxy runs in its own process.

Run:  python benchmarks/storage/remote.py [--images 2048] [--rtt-ms 0,20,50,150] [--seconds 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from stoker.bench import image_folder, require_optimized_core
from stoker.ingest import upload_to_cassandra, upload_to_s3
from stoker.loader import Loader, Reads, Sampling
from stoker.storage import CassandraConnection, CassandraStorage, S3Storage, open_storage
from stoker_testbed.peers.remote_peers import CassandraRowDataset, S3ObjectDataset, keep_list
from stoker_testbed.servers.cassandra_server import CassandraServer
from stoker_testbed.servers.proxy_process import ProxyProcess
from stoker_testbed.servers.s3_server import S3Server

BATCH = 32


def measure(batches: Iterable[list[bytes]], seconds: float) -> dict[str, float]:
    """Images/s and MB/s after the first batch, p50/p99 time between batches, first batch."""
    started = time.perf_counter()
    arrivals, images, payload, first_size = [], 0, 0, 0
    for batch in batches:
        arrivals.append(time.perf_counter())
        images += len(batch)
        payload += sum(len(item) for item in batch)
        first_size = first_size or sum(len(item) for item in batch)
        if arrivals[-1] - started > seconds:
            break
    steady = max(arrivals[-1] - arrivals[0], 1e-9)
    intervals = np.diff(arrivals) if len(arrivals) > 1 else np.array([steady])
    return {
        "images_per_second": (images - BATCH) / steady if len(arrivals) > 1 else BATCH / (arrivals[0] - started),
        "megabytes_per_second": (payload - first_size) / steady / 1e6 if len(arrivals) > 1 else first_size / (arrivals[0] - started) / 1e6,
        "p50_batch_ms": float(np.percentile(intervals, 50) * 1e3),
        "p99_batch_ms": float(np.percentile(intervals, 99) * 1e3),
        "first_batch_s": arrivals[0] - started,
        "batches": len(arrivals),
    }


def measure_steady(loader: Loader, seconds: float) -> dict[str, float]:
    """After one warm-up epoch: images/s over whole epochs, p50/p99 time between batches inside
    epochs, and the mean cost of an epoch boundary (the last batch's wait, whose stragglers
    cannot be replaced, plus the next epoch's first batch), reported on its own."""
    for _ in loader:
        pass
    inside: list[float] = []
    boundaries: list[float] = []
    images = 0
    started = time.perf_counter()
    epoch = 1
    while time.perf_counter() - started < seconds:
        loader.set_epoch(epoch)
        arrivals = [time.perf_counter()]
        for batch in loader:
            arrivals.append(time.perf_counter())
            images += len(batch.data)
        gaps = np.diff(arrivals)
        inside.extend(gaps[1:-1])
        boundaries.append(gaps[0] + gaps[-1])
        epoch += 1
    elapsed = time.perf_counter() - started
    return {
        "images_per_second": images / elapsed,
        "p50_batch_ms": float(np.percentile(inside, 50) * 1e3),
        "p99_batch_ms": float(np.percentile(inside, 99) * 1e3),
        "boundary_ms": float(np.mean(boundaries) * 1e3),
        "epochs": epoch - 1,
    }


def stoker_batches(storage: Any) -> Iterable[list[bytes]]:
    """Epoch after epoch (the measurement stops it): slow start once, as in a training job."""
    loader = Loader(storage, batch_size=BATCH, sampling=Sampling(seed=0))
    for epoch in range(1_000_000):
        loader.set_epoch(epoch)
        for batch in loader:
            yield batch.data


def dataloader_batches(dataset: Any) -> Iterable[list[bytes]]:
    """Epoch after epoch, workers kept between epochs."""
    import torch

    order = torch.Generator().manual_seed(0)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=BATCH, shuffle=True, generator=order, num_workers=2, collate_fn=keep_list, persistent_workers=True
    )
    for _ in range(1_000_000):
        yield from loader


def run_store(name: str, rtt_ms: float, open_through: Callable[[int], tuple[Any, Any]], port: int, seconds: float) -> list[dict[str, Any]]:
    """The three loaders on one store at one round-trip time."""
    rows = []
    with ProxyProcess(port, delay=rtt_ms / 2e3) as proxy:
        storage, peer = open_through(proxy.port)
        with storage:
            runs = {
                "stoker": lambda: stoker_batches(storage),
                "DataLoader 2 workers": lambda: dataloader_batches(peer(False)),
                "ConcurrentDataloader-style": lambda: dataloader_batches(peer(True)),
            }
            for loader, batches in runs.items():
                result = measure(batches(), seconds)
                rows.append({"store": name, "rtt_ms": rtt_ms, "loader": loader, **result})
                print(
                    f"{name:<10} {rtt_ms:>4.0f} ms  {loader:<28} {result['images_per_second']:>7.0f} img/s {result['megabytes_per_second']:>6.1f} MB/s  "
                    f"p50 {result['p50_batch_ms']:>6.0f} ms  p99 {result['p99_batch_ms']:>6.0f} ms",
                    flush=True,
                )
    return rows


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--rtt-ms", default="0,20,50,150")
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement time per loader and setting")
    parser.add_argument("--stores", default="s3,cassandra")
    parser.add_argument("--heavy-tail-only", action="store_true", help="skip the RTT sweep")
    parser.add_argument("--json")
    args = parser.parse_args()
    stores = args.stores.split(",")
    source = open_storage(image_folder(args.images, 800, 600))  # natural-looking JPEGs of about 100 KB
    keys = list(source.keys)
    print(f"{len(keys)} JPEGs, {sum(map(len, source.read_many(keys[:64]))) / 64 / 1e3:.0f} KB on average", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    with S3Server() as s3, CassandraServer(heap="1G") as cassandra:
        s3.create_bucket("bench")
        connection = CassandraConnection(
            hosts=[cassandra.host], port=cassandra.port, keyspace="bench", username=cassandra.username, password=cassandra.password
        )
        if "s3" in stores:
            upload_to_s3(source, "s3://bench/images", progress=False, **s3.options())
        if "cassandra" in stores and not args.heavy_tail_only:
            upload_to_cassandra(source, connection, concurrency=8, progress=False)

        def s3_through(port: int) -> tuple[Any, Any]:
            options = {**s3.options(), "endpoint": f"http://127.0.0.1:{port}"}
            return S3Storage("s3://bench/images", **options), lambda concurrent: S3ObjectDataset(
                keys, bucket="bench", prefix="images", options=options, concurrent=concurrent
            )

        def cassandra_through(port: int) -> tuple[Any, Any]:
            through = replace(connection, port=port)
            return CassandraStorage(through), lambda concurrent: CassandraRowDataset(keys, connection=through, concurrent=concurrent)

        openers = {"s3": (s3_through, s3.port), "cassandra": (cassandra_through, cassandra.port)}
        for rtt in () if args.heavy_tail_only else (float(value) for value in args.rtt_ms.split(",")):
            for store in stores:
                opener, port = openers[store]
                rows.extend(run_store(store, rtt, opener, port, args.seconds))
        # Heavy tail: one connection in ten is 10x slower (S3: a connection pool, so some requests
        # are slow while others are not). Each variant gets a fresh proxy (the same slow
        # connections, by seed) and a fresh connection pool: cancelled requests close
        # connections, so a pool that served one variant would be culled for the next.
        variants = {
            "stoker in order, no hedging (the paper's baseline)": (True, False),
            "stoker in order": (True, True),
            "stoker out of order": (False, True),
        }
        for label, (in_order, hedge) in variants.items() if "s3" in stores else ():
            with ProxyProcess(s3.port, delay=0.025, slow_fraction=0.1, slow_factor=10, seed=1) as proxy:
                with S3Storage("s3://bench/images", **{**s3.options(), "endpoint": f"http://127.0.0.1:{proxy.port}"}) as storage:
                    result = measure_steady(
                        Loader(storage, batch_size=BATCH, sampling=Sampling(seed=0, in_order=in_order), reads=Reads(hedge=hedge)),
                        args.seconds,
                    )
            rows.append({"store": "s3 heavy tail", "rtt_ms": 50.0, "loader": label, **result})
            print(
                f"s3 heavy tail 50 ms  {label:<52} {result['images_per_second']:>7.0f} img/s  "
                f"p50 {result['p50_batch_ms']:>6.0f} ms  p99 {result['p99_batch_ms']:>6.0f} ms  "
                f"epoch boundary {result['boundary_ms']:>5.0f} ms",
                flush=True,
            )
    summarize(rows)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


def summarize(rows: list[dict[str, Any]]) -> None:
    def find(store: str, rtt: float, loader: str) -> dict[str, Any] | None:
        return next((row for row in rows if row["store"] == store and row["rtt_ms"] == rtt and row["loader"] == loader), None)

    print("\nstore       RTT  stoker img/s  vs DataLoader  vs ConcurrentDataloader-style")
    for store, rtt in sorted({(row["store"], row["rtt_ms"]) for row in rows if row["store"] in ("s3", "cassandra")}):
        ours, torch_loader, concurrent = (
            find(store, rtt, name) for name in ("stoker", "DataLoader 2 workers", "ConcurrentDataloader-style")
        )
        if ours and torch_loader and concurrent:
            print(
                f"{store:<10} {rtt:>4.0f} {ours['images_per_second']:>13.0f} {ours['images_per_second'] / torch_loader['images_per_second']:>13.1f}x "
                f"{ours['images_per_second'] / concurrent['images_per_second']:>10.1f}x"
            )
    baseline = find("s3 heavy tail", 50.0, "stoker in order, no hedging (the paper's baseline)")
    in_order, out_of_order = find("s3 heavy tail", 50.0, "stoker in order"), find("s3 heavy tail", 50.0, "stoker out of order")
    if baseline and out_of_order:
        print(
            f"heavy tail at 50 ms: out of order {out_of_order['images_per_second'] / baseline['images_per_second']:.2f}x the throughput "
            f"of in order without hedging (p99/p50 {baseline['p99_batch_ms'] / baseline['p50_batch_ms']:.2f})"
        )
    if in_order and out_of_order:
        print(
            f"heavy tail at 50 ms, steady state: out of order p99/p50 {out_of_order['p99_batch_ms'] / out_of_order['p50_batch_ms']:.2f} "
            f"(in order {in_order['p99_batch_ms'] / in_order['p50_batch_ms']:.2f}); "
            f"throughput {out_of_order['images_per_second'] / in_order['images_per_second']:.2f}x in order; "
            f"epoch boundary {out_of_order['boundary_ms']:.0f} ms out of order, {in_order['boundary_ms']:.0f} ms in order"
        )


if __name__ == "__main__":
    main()
