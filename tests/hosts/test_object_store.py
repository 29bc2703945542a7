"""An object store on a host of its own and two hosts of two ranks each, every host with its own
node cache on its own disk: over two epochs every sample reaches exactly one rank per epoch, the
ranks take equal steps, and the store (its own request log) serves each object at most once to
each host while the caches hold the data. Then the network fails under the job: 1% loss and
100 ms to the store ride through, and a partition of a host from the store is ridden out within
the retry deadline, or raised by name when it outlasts it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from stoker_testbed.data.datasets import dataset
from stoker_testbed.hosts import HOST_DISK, HostNetwork
from stoker_testbed.servers.s3_server import S3Server
from tests.hosts.conftest import SAMPLES

ROOT = Path(__file__).resolve().parents[2]

RANK = """
import json, os, sys, time
from stoker import Loader, Reads, Sampling, Throughput
from stoker.storage import RetryPolicy, S3Storage
endpoint, cache, rank, world, epochs, deadline, barrier, step = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), sys.argv[7], float(sys.argv[8])
batch_size, timeout = int(sys.argv[9]), float(sys.argv[10])
options = dict(endpoint=endpoint, access_key_id="stoker-test", secret_access_key="stoker-secret", region="us-east-1", timeout=timeout)
retry = RetryPolicy(base_delay=0.1, max_delay=1.0, deadline=deadline, open_deadline=deadline)
out, arrived = [], []

def arrive():
    # Every rank waits for the others before closing its storage, as a job's ranks go on
    # together: closing drops this rank's warm-up of the next epoch half-fetched, and a rank
    # still reading on this host would fetch those objects again.
    if not arrived:
        arrived.append(True)
        open(f"{barrier}/{rank}", "w").close()
        while len(os.listdir(barrier)) < world:
            time.sleep(0.05)

def start_together():
    # The ranks start their epochs together, as a job's ranks do after their rendezvous: started
    # seconds apart on a loaded machine, one rank of h1 had read its whole epoch before the test
    # cut h1 off at its other rank's step 3. Bounded: a rank that failed to start is reported by
    # its own output, and the others go on.
    folder = barrier + ".ready"
    os.makedirs(folder, exist_ok=True)
    open(f"{folder}/{rank}", "w").close()
    waited = time.monotonic()
    while len(os.listdir(folder)) < world and time.monotonic() - waited < 120:
        time.sleep(0.02)

try:
    with S3Storage("s3://hosts/d", cache_dir=cache, cache_bytes=64 << 20, retry=retry, **options) as storage:
        # Two batches in flight and one kept ready, pinned (the tuner would raise them).
        loader = Loader(
            storage,
            batch_size=batch_size,
            sampling=Sampling(seed=3, rank=rank, world_size=world),
            reads=Reads(fetch_concurrency=2),
            throughput=Throughput(prefetch=1, autotune=False),
        )
        start_together()
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            started = time.monotonic()
            steps, keys = 0, []
            for batch in loader:
                steps += 1
                keys += [key for key, padding in zip(batch.keys, batch.padding) if not padding]
                time.sleep(step)  # the training step
                if epoch == 0 and steps == 3:
                    open(f"{barrier}.step3-{rank}", "w").close()  # the test may cut the network now
            stats = storage.stats()
            hedged = loader.prefetcher.hedged if loader.prefetcher is not None else 0
            out.append({"keys": keys, "steps": steps, "seconds": time.monotonic() - started, "retries": stats["retries"], "hits": stats["cache_hits"], "hedged": hedged})
        arrive()
except Exception as error:
    out.append({"error": f"{type(error).__name__}: {error}"})
    arrive()
print(json.dumps(out))
"""

_GET = re.compile(r"request: .*\{GET@\w+ http://([^/]+)/hosts/d/(\S*) HTTP")


def start_ranks(
    network: HostNetwork,
    endpoints: dict[str, str],
    *,
    epochs: int,
    deadline: float = 120.0,
    step: float = 0.0,
    batch_size: int = 8,
    timeout: float = 30.0,
) -> tuple[list[subprocess.Popen[str]], Path]:
    """Two ranks on each of h0 and h1 (ranks 0-1 on h0), each host's cache on its own disk,
    ``timeout`` seconds per request; returns them and their barrier (``<barrier>.step3-<rank>``
    appears at step 3 of epoch 0)."""
    processes = []
    barrier = Path(tempfile.mkdtemp(prefix="stoker-barrier-"))  # shared: only HOST_DISK differs between hosts
    for rank in range(4):
        host = "h0" if rank < 2 else "h1"
        arguments = [endpoints[host], str(HOST_DISK / "cache"), str(rank), "4", str(epochs), str(deadline), str(barrier), str(step)]
        arguments += [str(batch_size), str(timeout)]
        command = [*network[host].prefix(), sys.executable, "-c", RANK, *arguments]
        processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, text=True))
    return processes, barrier


def results(processes: list[subprocess.Popen[str]]) -> list[list[dict]]:
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, f"a rank exited with {process.returncode}: {err[-3000:]}\n{out[-1000:]}"
        outputs.append(json.loads(out.strip().splitlines()[-1]))
    return outputs


def run_ranks(network: HostNetwork, endpoints: dict[str, str], *, epochs: int) -> list[list[dict]]:
    return results(start_ranks(network, endpoints, epochs=epochs)[0])


def gets_by_host(server: S3Server) -> dict[str, Counter[str]]:
    time.sleep(0.5)  # the log is written by another process
    counts: dict[str, Counter[str]] = {}
    for line in server.log_path.read_text(errors="replace").splitlines():
        found = _GET.search(line)
        if found and found.group(2) != "dataset.json":
            asker = found.group(1).split(":")[0].removeprefix("store.from-")
            counts.setdefault(asker, Counter())[found.group(2)] += 1
    return counts


def test_each_host_fetches_each_object_once_and_every_sample_is_delivered_once_per_epoch(
    store_and_hosts: tuple[HostNetwork, S3Server],
) -> None:
    network, server = store_and_hosts
    endpoints = {host: f"http://store.from-{host}:{server.port}" for host in ("h0", "h1")}
    ranks = run_ranks(network, endpoints, epochs=2)
    for epoch in range(2):
        keys = Counter(key for rank in ranks for key in rank[epoch]["keys"])
        assert keys == Counter({key: 1 for key in dataset(SAMPLES).keys}), f"epoch {epoch}: every sample once over 4 ranks on 2 hosts"
        assert len({rank[epoch]["steps"] for rank in ranks}) == 1, "equal steps on every rank"
    by_host = gets_by_host(server)
    assert set(by_host) == {"h0", "h1"}, f"the log names the hosts that asked: {sorted(by_host)}"
    for host, counts in by_host.items():
        host_ranks = ranks[(0 if host == "h0" else 2) :][:2]
        retries = sum(rank[-1]["retries"] for rank in host_ranks)  # a retried request asks again
        # So does a hedged copy (a stalled request sent again): it fetches rather than wait for
        # the claim its original holds, as it would without a cache.
        hedged = sum(epoch["hedged"] for rank in host_ranks for epoch in rank)
        again = {key: count for key, count in counts.items() if count > 1}
        assert sum(again.values()) - len(again) <= retries + hedged, (
            f"{host} fetched objects again ({retries} retries, {hedged} hedged copies, "
            f"{[rank[-1]['hits'] for rank in host_ranks]} cache hits): {again}"
        )
        mine = {key for rank in host_ranks for epoch in rank for key in epoch["keys"]}
        assert mine <= set(counts), f"{host}'s ranks read only what {host} fetched"  # beyond it: the warm-up of epoch 2


def test_loss_and_latency_to_the_store_are_ridden_through(store_and_hosts: tuple[HostNetwork, S3Server]) -> None:
    network, server = store_and_hosts
    endpoints = {}
    for host in ("h0", "h1"):
        port = network.delayed_route(host, "store", server.port, delay=0.05)  # 100 ms round trip
        network.shape(host, loss_percent=1.0)
        endpoints[host] = f"http://store.from-{host}:{port}"
    ranks = run_ranks(network, endpoints, epochs=1)
    keys = Counter(key for rank in ranks for key in rank[0]["keys"])
    assert keys == Counter({key: 1 for key in dataset(SAMPLES).keys}), "nothing lost, nothing twice"


def test_a_partition_shorter_than_the_deadline_is_ridden_out_and_a_longer_one_is_named(
    store_and_hosts: tuple[HostNetwork, S3Server],
) -> None:
    network, server = store_and_hosts
    endpoints = {host: f"http://store.from-{host}:{server.port}" for host in ("h0", "h1")}

    def partitioned_run(seconds: float, deadline: float) -> list[list[dict]]:
        """A fresh epoch (empty caches) with h1 cut from the store from its step 3 for ``seconds``
        (less if h1's ranks end first). Batches of 2 (40 steps a rank): the batches the pipeline
        holds ahead (in flight, ready, being decoded: about 7) are a small part of the epoch, so
        the cut finds most of it still to fetch. A request gives up after 3 s and is retried
        until ``deadline``."""
        for host in ("h0", "h1"):
            subprocess.run([*network[host].prefix(), "rm", "-rf", str(HOST_DISK / "cache")], check=True)
        processes, barrier = start_ranks(network, endpoints, epochs=1, deadline=deadline, step=0.05, batch_size=2, timeout=3.0)
        signal = Path(f"{barrier}.step3-2")
        while not signal.exists() and all(process.poll() is None for process in processes):
            time.sleep(0.02)
        network.partition("h1", "store")
        cut = time.monotonic()
        try:
            while time.monotonic() - cut < seconds and any(process.poll() is None for process in processes[2:]):
                time.sleep(0.1)
        finally:
            network.heal("h1", "store")
        return results(processes)

    ridden = partitioned_run(seconds=20, deadline=60)
    keys = Counter(key for rank in ridden for key in rank[0]["keys"])
    assert keys == Counter({key: 1 for key in dataset(SAMPLES).keys}), "a 20 s partition, ridden out: every sample once"
    assert all(rank[0]["seconds"] >= 20 for rank in ridden[2:]), (
        f"h1's ranks waited the partition out: {[rank[0]['seconds'] for rank in ridden]}"
    )
    raised = partitioned_run(seconds=60, deadline=5)
    errors = [rank[-1].get("error", "") for rank in raised[2:]]
    assert all("StorageUnavailableError" in error and "s3://hosts/d" in error for error in errors), f"h1's ranks name the failure: {errors}"
    assert all("error" not in rank[-1] for rank in raised[:2]), "h0 was never cut off"
