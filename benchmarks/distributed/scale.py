"""Ranks against one store, measured at 2, 4 and 16 ranks on this machine and projected to 1,024.

Hosts are network namespaces (testbed/stoker_testbed/hosts.py) with one node cache each, shared
by the host's ranks; an S3 store sits on a host of its own ``--delay-ms`` away (one way). Each
job reads two epochs of ``--samples`` samples of ``--size-kb`` KB (a uniform shuffle over all
ranks each epoch). Per job, from the ranks' own counters:

- **start-up per rank**: the seconds to open the store (its ``dataset.json``: no listing) and
  build the Loader, and the index's bytes (one GET per rank);
- **the store**: GETs over both epochs and GETs per second (over the slowest rank's epoch);
- **the node cache**: its hit rate over both epochs (none in epoch 0: the ranks' shares are
  disjoint). Both epochs together, because the Loader warms the next epoch's first batches
  before an epoch ends; the last batch's padding (repeated samples) adds a few GETs the model
  leaves out.

The model, from per-rank costs: every rank GETs the index once at start (N GETs of the index's
size); epoch 0 GETs every sample once; in a later epoch a sample is dealt to a rank on the host
that cached it with probability ``1/H`` (H hosts; the cache holds the data), so epoch ``e`` hits
``1 - (1 - 1/H)^e`` and the store serves the rest; GETs per second are the ranks' sample rate
times the miss rate. It is checked against each measured job, then projected to 1,024 ranks
(128 hosts of 8) at the per-rank sample rate of the fewest ranks' cold epoch (every read a miss,
as nearly all are on 128 hosts). Beyond the model: each rank warms the next epoch's first
batches before an epoch ends (`EpochWarmup`), and the last epoch's warm-up is never read, a few
batches per rank. A request the Loader hedges (sent again once it stalls) finds its original's
claim on the node cache, waits for it and reads the cache: a hit the model does not count, shown
beside the hedged copies.

Run as root:  python benchmarks/distributed/scale.py [--jobs 2x1,2x2,4x4] [--samples 4000] [--size-kb 20] [--delay-ms 10]

What it cannot show: 16 ranks share this machine's 2 cores (the per-rank rate falls with the
ranks; the projection uses the rate of the least crowded job), and a real store's limits.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from stoker.ingest import upload_to_s3
from stoker.storage import MemoryStorage
from stoker_testbed.hosts import HOST_DISK, HostNetwork, rank_reports, start_python, unavailable
from stoker_testbed.servers.s3_server import S3Server

ROOT = Path(__file__).resolve().parents[2]

RANK = """
import json, os, sys, time
from stoker import Loader, Sampling
from stoker.storage import S3Storage
endpoint, cache, rank, world, barrier = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
options = dict(endpoint=endpoint, access_key_id="stoker-test", secret_access_key="stoker-secret", region="us-east-1")
started = time.perf_counter()
with S3Storage("s3://bench/d", cache_dir=cache, cache_bytes=1 << 30, **options) as storage:
    loader = Loader(storage, batch_size=32, sampling=Sampling(seed=1, rank=rank, world_size=world))
    report = {"open_seconds": time.perf_counter() - started, "epochs": []}
    for epoch in range(2):
        loader.set_epoch(epoch)
        before, began, samples = storage.stats(), time.perf_counter(), 0
        for batch in loader:
            samples += sum(1 for padding in batch.padding if not padding)
        after = storage.stats()
        report["epochs"].append({"samples": samples, "seconds": time.perf_counter() - began,
                                 "gets": after["requests"] - before["requests"], "hits": after["cache_hits"] - before["cache_hits"],
                                 "hedged": loader.prefetcher.hedged if loader.prefetcher is not None else 0})
    open(f"{barrier}/{rank}", "w").close()  # close only once every rank is done: a rank's cache outlives its reads
    while len(os.listdir(barrier)) < world:
        time.sleep(0.05)
print(json.dumps(report))
"""


def run_job(network: HostNetwork, endpoints: dict[str, str], hosts: int, per_host: int) -> list[dict[str, Any]]:
    """Every rank of ``hosts`` x ``per_host``, caches empty at the start; each rank's report."""
    names = [f"h{number}" for number in range(hosts)]
    for host in names:
        subprocess.run([*network[host].prefix(), "rm", "-rf", str(HOST_DISK / "cache")], check=True)
    barrier = Path(tempfile.mkdtemp(prefix="stoker-scale-barrier-"))
    world = hosts * per_host
    processes = []
    for rank in range(world):
        host = names[rank // per_host]
        arguments = [endpoints[host], str(HOST_DISK / "cache"), str(rank), str(world), str(barrier)]
        processes.append(start_python(network, host, RANK, arguments, ROOT))
    return rank_reports(processes, timeout=1800)


def predicted_hit_rate(hosts: int, epoch: int) -> float:
    """The node cache's hit rate in ``epoch`` under a uniform shuffle over all ranks."""
    return 1 - (1 - 1 / hosts) ** epoch


def summary(reports: list[dict[str, Any]], hosts: int, samples: int) -> dict[str, float]:
    """One job's figures: per-rank start-up, GETs and hit rate per epoch, GETs/s, samples/s per rank."""
    figures: dict[str, float] = {
        "ranks": len(reports),
        "open_median": sorted(report["open_seconds"] for report in reports)[len(reports) // 2],
        "open_max": max(report["open_seconds"] for report in reports),
    }
    for epoch in (0, 1):
        epochs = [report["epochs"][epoch] for report in reports]
        seconds = max(each["seconds"] for each in epochs)
        figures[f"gets_per_second{epoch}"] = sum(each["gets"] for each in epochs) / seconds
        figures[f"rank_rate{epoch}"] = sum(each["samples"] for each in epochs) / seconds / len(reports)
    # Both epochs together: the Loader warms the next epoch's first batches before this one
    # ends, so some of epoch 1's GETs (and the hits they make) are counted in epoch 0.
    gets = sum(each["gets"] for report in reports for each in report["epochs"])
    hits = sum(each["hits"] for report in reports for each in report["epochs"])
    figures["gets"], figures["predicted_gets"] = gets, samples * (2 - predicted_hit_rate(hosts, 1))
    figures["hit"], figures["predicted_hit"] = hits / max(1, hits + gets), predicted_hit_rate(hosts, 1) / 2
    figures["hits_beyond"] = hits - samples * predicted_hit_rate(hosts, 1)
    figures["hedged"] = sum(each["hedged"] for report in reports for each in report["epochs"])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="2x1,2x2,4x4", help="HOSTSxRANKS_PER_HOST, comma separated")
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--size-kb", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=10.0, help="one way, to the store")
    args = parser.parse_args()
    reason = unavailable()
    if reason is not None:
        raise SystemExit(f"benchmarks/distributed/scale.py needs network namespaces: {reason}")
    jobs = [tuple(int(part) for part in job.split("x")) for job in args.jobs.split(",")]
    most_hosts = max(hosts for hosts, _ in jobs)
    data = os.urandom(args.size_kb * 1024)
    source = MemoryStorage({f"c{index % 10}/{index:06d}.jpg": data[index % 64 :] for index in range(args.samples)})
    names = [f"h{number}" for number in range(most_hosts)]
    results = []
    with HostNetwork(["store", *names]) as network:
        server = S3Server(host=network["store"].address)
        server.prefix = network["store"].prefix()
        server.start()
        try:
            server.create_bucket("bench")
            upload_to_s3(source, "s3://bench/d", progress=False, decode_check=False, **server.options())
            index_bytes = len(server.client().get_object(Bucket="bench", Key="d/dataset.json")["Body"].read())
            endpoints = {}
            for host in names:
                port = network.delayed_route(host, "store", server.port, delay=args.delay_ms / 1e3)
                endpoints[host] = f"http://store.from-{host}:{port}"
            run_job(network, endpoints, 1, 1)  # the store's JVM warms up: not measured
            for hosts, per_host in jobs:
                results.append((hosts, per_host, summary(run_job(network, endpoints, hosts, per_host), hosts, args.samples)))
        finally:
            server.close()
    report(results, args, index_bytes)


def report(results: list[tuple[int, int, dict[str, float]]], args: argparse.Namespace, index_bytes: int) -> None:
    print(
        f"{args.samples:,} samples of {args.size_kb} KB, store {2 * args.delay_ms:g} ms away, one node cache per host; "
        f"index (dataset.json) {index_bytes / 1e3:,.1f} KB, one GET per rank; this machine's 2 cores shared by all"
    )
    print(
        "| ranks (hosts x per host) | start-up per rank, median / max | GETs, 2 epochs (model) | beyond the model, per rank | "
        "node-cache hits, 2 epochs (model) | hits beyond the model / hedged copies | GETs/s at the store, epoch 0 / 1 | "
        "samples/s per rank, epoch 0 / 1 |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for hosts, per_host, figures in results:
        print(
            f"| {hosts * per_host} ({hosts} x {per_host}) | {figures['open_median']:.2f} / {figures['open_max']:.2f} s | "
            f"{figures['gets']:,.0f} ({figures['predicted_gets']:,.0f}) | {(figures['gets'] - figures['predicted_gets']) / figures['ranks']:,.0f} | "
            f"{figures['hit']:.1%} ({figures['predicted_hit']:.1%}) | {figures['hits_beyond']:,.0f} / {figures['hedged']:,.0f} | "
            f"{figures['gets_per_second0']:,.0f} / {figures['gets_per_second1']:,.0f} | {figures['rank_rate0']:,.0f} / {figures['rank_rate1']:,.0f} |"
        )
    hosts, per_host, least = min(results, key=lambda result: result[0] * result[1])
    rate = least["rank_rate0"]  # every read a miss, as nearly all are on 128 hosts
    print(f"\nprojected to 1,024 ranks (128 hosts x 8) at {rate:,.0f} samples/s per rank ({hosts * per_host} ranks' epoch 0 here):")
    for ranks, hosts_then in ((1024, 128),):
        for epoch in (1, 4):
            miss = 1 - predicted_hit_rate(hosts_then, epoch)
            print(
                f"  {ranks:>5} ranks on {hosts_then:>3} hosts, epoch {epoch}: node-cache hits {1 - miss:.1%}, "
                f"{ranks * rate * miss:,.0f} GETs/s ({ranks * rate * miss * args.size_kb / 1e3:,.1f} MB/s) at the store; "
                f"start-up: {ranks:,} index GETs, {ranks * index_bytes / 1e6:,.1f} MB"
            )


if __name__ == "__main__":
    main()
