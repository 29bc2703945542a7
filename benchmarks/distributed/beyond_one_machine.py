"""Beyond one machine, measured on this one:

1. Cassandra, 1 node against a 3-node cluster on loopback (replication 3, token-aware routing):
   one epoch of raw bytes through the stoker Loader, samples/s and CPU per sample, at
   consistency ONE and QUORUM. All nodes share this machine's cores, so the cluster is not
   expected to be faster here: the row says what replication and routing cost.
2. The driver: CPU per row for cassandra-driver against scylla-driver (shard-aware; a drop-in
   that also imports as ``cassandra``, so it runs in a virtual environment of its own, made here
   once with pip), reading the same keyspace with `CassandraStorage.read_many`.
3. One cache per node: 3 local ranks (processes) over 2 epochs from an S3 server behind a 20 ms
   proxy, with one shared `cache_dir` against one cache per rank: samples fetched from the store
   and the cache hit rate.

4. Conversion of ``--images`` JPEGs (an ImageFolder of hard links to 2,000 distinct files) to tar
   shards: ``stoker convert`` against ``--ray`` on a local Ray of this machine's cores, byte for
   byte the same output; then the time the Ray run would take with more workers, projected from
   its tasks' own time (which spreads) and the driver's (assembly and verification, which does
   not), plus the start-up measured here.
5. Feeding training from a Ray Data pipeline (``--feed`` JPEGs decoded to 224x224 by stoker's
   source on Ray's workers, then ``map_batches``): Ray's own ``iter_torch_batches`` against
   `stoker.ray.RayLoader` with `to_device` and the data-wait meter, on the same pipeline, rows/s.
   What RayLoader adds (fixed-shape reused batch memory, keys, labels, the meter, resume) should
   cost nothing measurable: the ratio says whether it does.

Run:  python benchmarks/distributed/beyond_one_machine.py [--samples 3000] [--size-kb 20] [--images 50000] [--feed 4000]
                                       [--only convert|feed]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from stoker.ingest import upload_to_cassandra, upload_to_s3
from stoker.loader import Loader, Sampling
from stoker.storage import CassandraConnection, CassandraStorage, MemoryStorage, cache_dir
from stoker_testbed.servers.cassandra_cluster import CassandraCluster
from stoker_testbed.servers.cassandra_server import CassandraServer
from stoker_testbed.servers.proxy_process import ProxyProcess
from stoker_testbed.servers.s3_server import S3Server

ROOT = Path(__file__).resolve().parents[2]

# Reads every sample of a keyspace once with read_many; prints CPU seconds and rows.
DRIVER_READ = """
import json, sys, time
from stoker.storage import CassandraConnection, CassandraStorage
import cassandra
settings = json.loads(sys.argv[1])
with CassandraStorage(CassandraConnection(**settings)) as storage:
    keys = list(storage.keys)
    storage.read_many(keys[:200])  # connections and prepared statements
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, len(keys), 256):
        storage.read_many(keys[start:start + 256])
    print(json.dumps({"driver": cassandra.__name__ + " " + cassandra.__version__, "rows": len(keys),
                      "cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}))
"""


def samples(count: int, size: int) -> MemoryStorage:
    generator = np.random.default_rng(0)
    return MemoryStorage(
        {f"c{index % 10}/{index:06d}.jpg": generator.integers(0, 256, size, dtype=np.uint8).tobytes() for index in range(count)},
        {f"c{index % 10}/{index:06d}.jpg": index % 10 for index in range(count)},
    )


def epoch(connection: CassandraConnection) -> dict[str, float]:
    with CassandraStorage(connection) as storage:
        loader = Loader(storage, batch_size=32, sampling=Sampling(seed=0))
        cpu, wall = time.process_time(), time.perf_counter()
        count = sum(len(batch.keys) for batch in loader)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"samples_per_second": count / wall, "cpu_us_per_sample": 1e6 * cpu / count}


def scylla_python() -> str | None:
    """A Python with scylla-driver, numpy and tqdm (made once under stoker's cache); None if pip fails."""
    folder = cache_dir("bench", "scylla-driver-venv")
    python = folder / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "scylla-driver", "numpy", "tqdm"], capture_output=True, text=True
        )
        if installed.returncode != 0:
            print(f"  scylla-driver: left out, pip failed: {installed.stderr.strip().splitlines()[-1:]}")
            return None
    return str(python)


def driver_cpu(python: str, settings: dict[str, object]) -> dict[str, object]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "python")}  # stoker from this tree, native core included
    finished = subprocess.run([python, "-c", DRIVER_READ, json.dumps(settings)], capture_output=True, text=True, env=environment, cwd=ROOT)
    if finished.returncode != 0:
        raise RuntimeError(finished.stderr.strip().splitlines()[-1])
    return json.loads(finished.stdout.strip().splitlines()[-1])


RANK = """
import json, sys
from stoker import Loader
from stoker.storage import S3Storage
url, endpoint, cache, rank = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = []
with S3Storage(url, endpoint=endpoint, cache_dir=cache, cache_bytes=4 << 30) as storage:
    loader = Loader(storage, batch_size=32, seed=3, rank=rank, world_size=3)
    for number in range(2):
        loader.set_epoch(number)
        before = storage.stats()
        count = sum(len(batch.keys) for batch in loader)
        after = storage.stats()
        rows.append({"samples": count, "fetched": after["requests"] - before["requests"], "hits": after["cache_hits"] - before["cache_hits"]})
print(json.dumps(rows))
"""


def node_cache(source: MemoryStorage) -> None:
    with S3Server() as s3, tempfile.TemporaryDirectory(prefix="stoker-node-cache-") as scratch:
        s3.create_bucket("nodecache")
        upload_to_s3(source, "s3://nodecache/d", progress=False, **s3.options())
        with ProxyProcess(s3.port, delay=0.01) as proxy:
            endpoint = f"http://127.0.0.1:{proxy.port}"
            environment = {**os.environ, **s3.environment()}
            for shared in (True, False):
                caches = [Path(scratch) / ("shared" if shared else f"rank{rank}") for rank in range(3)]
                ranks = [
                    subprocess.Popen(
                        [sys.executable, "-c", RANK, "s3://nodecache/d", endpoint, str(caches[rank]), str(rank)],
                        stdout=subprocess.PIPE,
                        env=environment,
                        cwd=ROOT,
                    )
                    for rank in range(3)
                ]
                rows = [json.loads(rank.communicate(timeout=1800)[0]) for rank in ranks]
                fetched = sum(epoch["fetched"] for rank in rows for epoch in rank)
                second = [rank[1] for rank in rows]
                hit_rate = sum(epoch["hits"] for epoch in second) / max(1, sum(epoch["samples"] for epoch in second))
                label = "one cache for the node" if shared else "one cache per rank   "
                print(
                    f"  {label}: {fetched} fetches from the store for {len(source)} samples over 2 epochs "
                    f"({fetched / len(source):.2f} per sample); epoch 2 hit rate {100 * hit_rate:.0f}%",
                    flush=True,
                )


def image_links(count: int, folder: Path) -> Path:
    """An ImageFolder of ``count`` JPEGs: hard links to 2,000 generated ones, 10 classes."""
    from stoker.bench import image_folder

    base = Path(image_folder(min(count, 2000), 500, 375))
    originals = sorted(base.rglob("*.jpg"))
    for index in range(count):
        target = folder / f"class_{index % 10:02d}" / f"{index:06d}.jpg"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(originals[index % len(originals)], target)
    return folder


def conversion(count: int) -> None:
    from stoker.ingest import convert_storage
    from stoker.storage import open_storage

    try:
        import ray

        from stoker.ray import convert_with_ray
    except ImportError as error:
        print(f"  --ray: left out ({error}; pip install 'stoker[ray]')")
        return
    with tempfile.TemporaryDirectory(prefix="stoker-convert-bench-") as scratch:
        source = image_links(count, Path(scratch) / "images")
        started = time.perf_counter()
        with open_storage(source) as storage:
            report = convert_storage(storage, Path(scratch) / "alone", progress=False, decode_check=False)  # as --ray: bytes only
        alone = time.perf_counter() - started
        print(f"  stoker convert       : {alone:6.1f} s ({report.samples / alone:6.0f} images/s, {report.shards} shards)", flush=True)
        cores = os.cpu_count() or 1
        started = time.perf_counter()
        ray.init(num_cpus=cores, log_to_driver=False, include_dashboard=False)
        up = time.perf_counter() - started
        timing: dict[str, float] = {}
        try:
            convert_with_ray(str(source), Path(scratch) / "ray", rows_per_block=500, timing=timing)
        finally:
            ray.shutdown()
        with_ray = time.perf_counter() - started
        same = all((Path(scratch) / "ray" / path.name).read_bytes() == path.read_bytes() for path in (Path(scratch) / "alone").iterdir())
        print(
            f"  stoker convert --ray : {with_ray:6.1f} s with {cores} workers ({count / with_ray:6.0f} images/s; Ray start {up:.1f} s; "
            f"{timing['write_tasks']:.0f} write tasks {timing['write_seconds']:.1f} s of work, {report.shards} shard tasks "
            f"{timing['shard_seconds']:.1f} s, driver {timing['driver_seconds']:.1f} s); "
            f"{'byte-identical' if same else 'DIFFERENT OUTPUT'}: {alone / with_ray:.2f}x",
            flush=True,
        )

        def phases(workers: int) -> float:
            """The two phases on ``workers`` (the shard phase cannot use more workers than shards)."""
            shards = max(timing["shard_seconds"] / workers, timing["longest_shard_seconds"])
            return timing["write_seconds"] / workers + shards + timing["driver_seconds"]

        overhead = max(0.0, with_ray - up - phases(cores))  # Ray's scheduling and transfers, measured
        for workers in (8, 32, 128):
            projected = up + overhead + phases(workers)
            print(f"  projected, {workers:3d} workers: {projected:6.1f} s ({alone / projected:.1f}x one machine's convert)")
        # The same per-sample costs at ImageNet-1k's size: the work grows, the fixed costs do not.
        scale = 1_281_167 / count
        timing = {
            key: value * scale if key != "longest_shard_seconds" and key.endswith("seconds") else value for key, value in timing.items()
        }
        big = up + overhead + phases(128)
        print(f"  projected, 1,281,167 images: one machine {alone * scale:6.0f} s, 128 workers {big:5.0f} s ({alone * scale / big:.0f}x)")


def ray_feed(count: int) -> None:
    """Section 5: one Ray pipeline, consumed two ways, alternately, twice each (best of two)."""
    try:
        import ray

        from stoker.ray import RayLoader, StokerDatasource
    except ImportError as error:
        print(f"  left out ({error}; pip install 'stoker[ray]')")
        return
    import torch

    from stoker.device import to_device
    from stoker.observe import DataWaitMeter
    from stoker.ops import ImageTransform

    def normalized(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**batch, "image": (255 - batch["image"]).astype(np.uint8)}  # stands for a user's preprocessing

    with tempfile.TemporaryDirectory(prefix="stoker-feed-bench-") as scratch:
        from stoker.ingest import convert_storage
        from stoker.storage import open_storage

        with open_storage(image_links(count, Path(scratch) / "images")) as storage:
            convert_storage(storage, Path(scratch) / "shards", progress=False)
        ray.init(num_cpus=os.cpu_count() or 1, log_to_driver=False, include_dashboard=False)
        try:
            source = StokerDatasource(
                str(Path(scratch) / "shards"), columns=("key", "label", "image"), transform=ImageTransform(resize=(224, 224))
            )
            dataset = ray.data.read_datasource(source).map_batches(normalized, batch_format="numpy")

            def ray_own() -> int:
                rows = 0
                # Ray turns every column into a tensor: the string keys are left out (stoker keeps them).
                tensors = dataset.select_columns(["image", "label"])
                for batch in tensors.iter_torch_batches(batch_size=64, dtypes={"image": torch.uint8, "label": torch.int64}, device="cpu"):
                    rows += len(batch["image"])
                return rows

            def stoker_feed() -> int:
                meter = DataWaitMeter(RayLoader(dataset, batch_size=64), verbose=False)
                return sum(len(moved.host) for moved in to_device(meter, "cpu"))

            best: dict[str, float] = {}
            for _ in range(2):
                for name, run in (("Ray iter_torch_batches", ray_own), ("stoker RayLoader", stoker_feed)):
                    started = time.perf_counter()
                    rows = run()
                    assert rows == count, f"{name} delivered {rows} of {count} rows"
                    best[name] = max(best.get(name, 0.0), rows / (time.perf_counter() - started))
        finally:
            ray.shutdown()
    for name, rate in best.items():
        print(f"  {name:<22}: {rate:7.0f} rows/s", flush=True)
    print(f"  stoker / Ray: {best['stoker RayLoader'] / best['Ray iter_torch_batches']:.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--size-kb", type=int, default=20)
    parser.add_argument("--images", type=int, default=50_000, help="JPEGs converted with and without Ray")
    parser.add_argument("--feed", type=int, default=4000, help="JPEGs fed to training from a Ray pipeline")
    parser.add_argument("--only", choices=["convert", "feed"], help="run one part alone")
    parser.add_argument(
        "--hosts", type=int, help="instead: the multi-host figures on this many hosts (benchmarks/distributed/hosts.py, root)"
    )
    args = parser.parse_args()
    if args.hosts:
        subprocess.run([sys.executable, str(Path(__file__).with_name("hosts.py")), "--hosts", str(args.hosts)], check=True)
        return
    if args.only == "convert":
        print(f"Conversion of {args.images} JPEGs to tar shards:")
        conversion(args.images)
        return
    if args.only == "feed":
        print(f"Feeding training from a Ray pipeline, {args.feed} JPEGs at 224x224, batches of 64:")
        ray_feed(args.feed)
        return
    source = samples(args.samples, args.size_kb << 10)
    print(f"{args.samples} samples of {args.size_kb} KB")
    print("Cassandra, one epoch through the Loader (raw bytes, batches of 32):")
    with CassandraServer(heap="1G") as single:
        connection = CassandraConnection(
            hosts=[single.host], port=single.port, keyspace="bench", username=single.username, password=single.password
        )
        upload_to_cassandra(source, connection, progress=False)
        result = epoch(connection)
        print(
            f"  1 node            : {result['samples_per_second']:7.0f} samples/s, {result['cpu_us_per_sample']:5.0f} us CPU per sample",
            flush=True,
        )
        settings = {
            "hosts": [single.host],
            "port": single.port,
            "keyspace": "bench",
            "username": single.username,
            "password": single.password,
        }
        print("The driver, CPU per row (read_many of every row, 1 node):")
        pythons = {"cassandra-driver": sys.executable, "scylla-driver": scylla_python()}
        for name, python in pythons.items():
            if python is None:
                continue
            try:
                measured = driver_cpu(python, settings)
            except RuntimeError as error:
                print(f"  {name}: left out ({error})")
                continue
            print(
                f"  {measured['driver']:<24}: {1e6 * measured['cpu'] / measured['rows']:5.0f} us CPU per row, {measured['rows'] / measured['wall']:7.0f} rows/s",
                flush=True,
            )
    with CassandraCluster(3) as cluster:
        upload_to_cassandra(
            source,
            CassandraConnection(hosts=cluster.hosts, port=cluster.port, keyspace="bench", consistency="QUORUM"),
            replication=3,
            progress=False,
        )
        for consistency in ("ONE", "QUORUM"):
            result = epoch(CassandraConnection(hosts=cluster.hosts, port=cluster.port, keyspace="bench", consistency=consistency))
            print(
                f"  3 nodes, RF 3, {consistency:<6}: {result['samples_per_second']:7.0f} samples/s, {result['cpu_us_per_sample']:5.0f} us CPU per sample",
                flush=True,
            )
    print("One cache per node, 3 local ranks, 2 epochs, S3 at 20 ms:")
    node_cache(source)
    print(f"Conversion of {args.images} JPEGs to tar shards:")
    conversion(args.images)
    print(f"Feeding training from a Ray pipeline, {args.feed} JPEGs at 224x224, batches of 64:")
    ray_feed(args.feed)


if __name__ == "__main__":
    main()
