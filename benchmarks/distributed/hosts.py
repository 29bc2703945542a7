"""Several hosts on one machine (network namespaces, testbed/stoker_testbed/hosts.py), an S3 store on a host
of its own 50 ms away (a latency proxy on each host's loopback: this kernel has no netem), and
``--hosts`` hosts of ``--ranks-per-host`` ranks each reading two epochs of ``--samples`` samples:

1. samples/s per host, epoch 0 (cold) and epoch 1, with one node cache per host (shared by its
   ranks, on the host's own disk) and without any cache; and each round's cold epoch with the
   cache as a share of the one without it run next to it;
2. bytes fetched from the store per host per epoch (the ranks' own counts of what they fetched);
3. the epoch-time cost of a partition: h1 cut from the store for ``--partition`` seconds from its
   third batch, against the same epoch without it (caches empty in both);
4. with ``--threads``, each rank's CPU per sample over epoch 0 thread by thread (from
   ``/proc/self/task``), with the cache and without: where a cache's cost goes.

Run as root:  python benchmarks/distributed/hosts.py [--hosts 2] [--ranks-per-host 2] [--samples 2000] [--size-kb 20]
[--delay-ms 25] [--rounds 1] [--partition 5] [--threads]
(``python benchmarks/distributed/beyond_one_machine.py --hosts 2`` runs the same.)

What it cannot show: a datacenter's bandwidth and its switches' queues (every byte here crosses
one machine's memory, and the hosts share its 2 cores), and more than a handful of hosts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
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
endpoint, cache, rank, world, barrier, signal, per_thread = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]

def thread_seconds():  # CPU seconds of each live thread, by id: (its name without a number, seconds)
    import re, threading
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    seconds = {}
    for task in os.listdir("/proc/self/task"):
        try:
            fields = open(f"/proc/self/task/{task}/stat").read().rsplit(")", 1)[1].split()
            name = names.get(int(task)) or open(f"/proc/self/task/{task}/comm").read().strip()
        except OSError:  # ended just now
            continue
        seconds[int(task)] = (re.sub("[-_][0-9]+$", "", name), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return seconds
options = dict(endpoint=endpoint, access_key_id="stoker-test", secret_access_key="stoker-secret", region="us-east-1")
epochs = []
with S3Storage("s3://bench/d", cache_dir=cache or None, cache_bytes=1 << 30, **options) as storage:
    loader = Loader(storage, batch_size=32, sampling=Sampling(seed=1, rank=rank, world_size=world))
    for epoch in range(2 if not signal else 1):
        # Every rank starts an epoch together, as a synchronous job's ranks do: ranks are started
        # one after another, and here all hosts share this machine's cores, so a rank that began
        # alone, or ran on into the next epoch, would take them from the others' epoch.
        open(f"{barrier}/epoch{epoch}-{rank}", "w").close()
        while sum(name.startswith(f"epoch{epoch}-") for name in os.listdir(barrier)) < world:
            time.sleep(0.01)
        loader.set_epoch(epoch)
        timing_threads = per_thread and epoch == 0
        first = thread_seconds() if timing_threads else {}
        seen = dict(first)  # each thread's seconds when last seen: some end before the epoch does
        before, started, cpu, samples = storage.stats()["bytes"], time.perf_counter(), time.process_time(), 0
        for step, batch in enumerate(loader):
            samples += sum(1 for padding in batch.padding if not padding)
            if signal and step == 2:
                open(f"{signal}-{rank}", "w").close()
            if timing_threads and step % 8 == 0:  # the pipeline's threads end with the epoch
                seen.update(thread_seconds())
        epochs.append({"samples": samples, "seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "bytes": storage.stats()["bytes"] - before})
        if timing_threads:
            threads = {}
            seen.update(thread_seconds())
            for task, (name, seconds) in seen.items():
                threads[name] = threads.get(name, 0.0) + seconds - first.get(task, (name, 0.0))[1]
            threads["threads that ended"] = epochs[-1]["cpu"] - sum(threads.values())  # since last seen
            epochs[-1]["threads"] = threads
    open(f"{barrier}/done-{rank}", "w").close()  # close only once every rank is done (see tests/hosts)
    while sum(name.startswith("done-") for name in os.listdir(barrier)) < world:
        time.sleep(0.05)
print(json.dumps(epochs))
"""


def run_job(
    network: HostNetwork,
    endpoints: dict[str, str],
    hosts: list[str],
    *,
    cache: bool,
    partition: float = 0.0,
    ranks_per_host: int = 2,
    threads: bool = False,
) -> list[Any]:
    """Every host's ranks, to the end; with ``partition``, h1 is cut from the store for that
    long from its first rank's third batch; with ``threads``, epoch 0's CPU of each thread is
    in the rank's report. Returns each rank's epochs, in rank order."""
    for host in hosts:  # empty caches: every job starts cold
        subprocess.run([*network[host].prefix(), "rm", "-rf", str(HOST_DISK / "cache")], check=True)
    barrier = Path(tempfile.mkdtemp(prefix="stoker-bench-barrier-"))
    signal = str(barrier) + ".cut" if partition else ""
    world = ranks_per_host * len(hosts)
    processes = []
    for rank in range(world):
        host = hosts[rank // ranks_per_host]
        arguments = [
            endpoints[host],
            str(HOST_DISK / "cache") if cache else "",
            str(rank),
            str(world),
            str(barrier),
            signal,
            "1" if threads else "",
        ]
        processes.append(start_python(network, host, RANK, arguments, ROOT))
    if partition:
        while not Path(f"{signal}-{ranks_per_host}").exists() and processes[ranks_per_host].poll() is None:
            time.sleep(0.02)
        network.partition("h1", "store")
        time.sleep(partition)
        network.heal("h1", "store")
    return rank_reports(processes, timeout=900)


def per_host(results: list[Any], hosts: list[str], epoch: int, ranks_per_host: int = 2) -> dict[str, dict[str, float]]:
    """Samples/s (the host's ranks together, over the slowest one's time) and bytes fetched."""
    figures = {}
    for number, host in enumerate(hosts):
        ranks = [results[ranks_per_host * number + local][epoch] for local in range(ranks_per_host)]
        seconds = max(rank["seconds"] for rank in ranks)
        figures[host] = {
            "rate": sum(rank["samples"] for rank in ranks) / seconds,
            "bytes": sum(rank["bytes"] for rank in ranks),
            "seconds": seconds,
            "cpu": sum(rank["cpu"] for rank in ranks) / sum(rank["samples"] for rank in ranks),
        }
    return figures


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2


def print_threads(raw: list[dict[str, Any]]) -> None:
    """Each thread's CPU per sample over epoch 0, median over the ranks of every round."""
    figures: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}
    for job in raw:
        for epochs in job["ranks"]:
            for name, seconds in epochs[0]["threads"].items():
                figures[job["cache"]].setdefault(name, []).append(seconds / epochs[0]["samples"] * 1e6)
    names = sorted(set(figures[True]) | set(figures[False]), key=lambda name: -median(figures[True].get(name, [0.0])))
    print("\neach rank's CPU per sample over epoch 0, thread by thread (median over ranks and rounds):")
    print("| thread | node cache | none |")
    print("| --- | ---: | ---: |")
    for name in names:
        cells = [f"{median(figures[cache][name]):,.0f} us" if name in figures[cache] else "-" for cache in (True, False)]
        print(f"| {name} | {cells[0]} | {cells[1]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--ranks-per-host", type=int, default=2)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--size-kb", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=25.0, help="one way, to the store (50 ms round trip)")
    parser.add_argument("--rounds", type=int, default=1, help="jobs with and without the cache, alternating; medians shown")
    parser.add_argument("--partition", type=float, default=5.0, help="seconds h1 is cut from the store (0: not measured)")
    parser.add_argument("--raw", help="write every job's per-rank epochs to this JSON file")
    parser.add_argument("--threads", action="store_true", help="each rank's CPU per sample over epoch 0, thread by thread")
    args = parser.parse_args()
    reason = unavailable()
    if reason is not None:
        raise SystemExit(f"benchmarks/distributed/hosts.py needs network namespaces: {reason}")
    hosts = [f"h{number}" for number in range(args.hosts)]
    per = args.ranks_per_host
    data = os.urandom(args.size_kb * 1024)
    source = MemoryStorage({f"c{index % 10}/{index:06d}.jpg": data[index % 64 :] for index in range(args.samples)})
    rows: dict[bool, list[tuple[dict[str, dict[str, float]], ...]]] = {True: [], False: []}
    raw: list[dict[str, Any]] = []
    with HostNetwork(["store", *hosts]) as network:
        server = S3Server(host=network["store"].address)
        server.prefix = network["store"].prefix()
        server.start()
        try:
            server.create_bucket("bench")
            upload_to_s3(source, "s3://bench/d", progress=False, decode_check=False, **server.options())
            endpoints = {}
            for host in hosts:
                port = network.delayed_route(host, "store", server.port, delay=args.delay_ms / 1e3)
                endpoints[host] = f"http://store.from-{host}:{port}"
            for cache in (False, True):  # the store's JVM warms up: not measured
                run_job(network, endpoints, hosts, cache=cache, ranks_per_host=per)
            for round_ in range(args.rounds):
                for cache in (True, False) if round_ % 2 else (False, True):  # neither always first
                    results = run_job(network, endpoints, hosts, cache=cache, ranks_per_host=per, threads=args.threads)
                    raw.append({"cache": cache, "ranks": results})
                    rows[cache].append((per_host(results, hosts, 0, per), per_host(results, hosts, 1, per)))
            if args.partition and len(hosts) > 1:
                calm = per_host(run_job(network, endpoints, hosts, cache=True, ranks_per_host=per), hosts, 0, per)
                cut = per_host(run_job(network, endpoints, hosts, cache=True, partition=args.partition, ranks_per_host=per), hosts, 0, per)
        finally:
            server.close()
    if args.raw:
        Path(args.raw).write_text(json.dumps(raw))

    def figure(cache: bool, epoch: int, host: str, what: str) -> float:
        return median([round_[epoch][host][what] for round_ in rows[cache]])

    print(
        f"{args.hosts} hosts x {per} ranks, {args.samples:,} samples of {args.size_kb} KB, store {2 * args.delay_ms:g} ms away, "
        f"medians of {args.rounds} rounds; this machine's 2 cores shared by all"
    )
    print(
        "| host | node cache | samples/s, epoch 0 | x no cache | samples/s, epoch 1 | x no cache | "
        "rank CPU per sample, epoch 0 | epoch 1 | MB from the store, epoch 0 | epoch 1 |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for cache in (True, False):
        for host in hosts:
            first, second = figure(cache, 0, host, "rate"), figure(cache, 1, host, "rate")
            print(
                f"| {host} | {'one per host' if cache else 'none'} | {first:,.0f} | {first / figure(False, 0, host, 'rate'):.2f} | "
                f"{second:,.0f} | {second / figure(False, 1, host, 'rate'):.2f} | "
                f"{figure(cache, 0, host, 'cpu') * 1e6:,.0f} us | {figure(cache, 1, host, 'cpu') * 1e6:,.0f} us | "
                f"{figure(cache, 0, host, 'bytes') / 1e6:.1f} | {figure(cache, 1, host, 'bytes') / 1e6:.1f} |"
            )
    # The machine's load drifts over a run by more than the cache's cost: each round's cache job
    # against the job without it run next to it cancels the drift the medians above keep.
    print("\neach round's job with the cache against the one without it next to it (epoch 0; median, lowest-highest):")
    for host in hosts:
        ratios = sorted(with_[0][host]["rate"] / without[0][host]["rate"] for with_, without in zip(rows[True], rows[False], strict=True))
        print(f"  {host}: {median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})")
    if args.threads:
        print_threads(raw)
    if args.partition and len(hosts) > 1:
        print(f"\npartition of h1 from the store for {args.partition:.0f} s from its third batch (epoch 0, caches cold):")
        for host in hosts:
            print(
                f"  {host}: epoch {calm[host]['seconds']:.1f} s without, {cut[host]['seconds']:.1f} s with "
                f"(+{cut[host]['seconds'] - calm[host]['seconds']:.1f} s)"
            )


if __name__ == "__main__":
    main()
