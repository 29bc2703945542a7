"""The Loader's own cost on the image path: CPU per image of a Loader epoch against the native
batch decode alone (decode + resize 256 + center crop 224 into a uint8 CHW batch of 32), the
same JPEGs in memory, so nothing but the Loader's own work separates the two.

Reports, medians of ``--rounds`` interleaved rounds:
- CPU ms per image: native decode alone (one thread), the Loader over MemoryStorage (no reads),
  the Loader over FileStorage (reads from the page cache included);
- the Loader's overhead: its CPU per image over the native one, minus 1 (target: under 5%);
- images/s: the native decode on every core at once (the ceiling), and the Loader over
  FileStorage as a share of it (target: at least 90%).

Run:  python benchmarks/loader/loader_overhead.py [--images 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from stoker import Loader
from stoker.bench import iter_jpegs, require_optimized_core
from stoker.loader import Sampling
from stoker.ops import ImageTransform
from stoker.ops.batch import decode_batch
from stoker.storage import FileStorage, MemoryStorage

BATCH = 32
TRANSFORM = ImageTransform(resize_shorter=256, center_crop=(224, 224), layout="CHW")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def native(payloads: list[bytes], threads: int = 1) -> tuple[float, float]:
    """(CPU seconds per image, images/s): ``decode_batch`` over every batch, on ``threads`` threads."""
    batches = [payloads[start : start + BATCH] for start in range(0, len(payloads), BATCH)]

    def work(part: list[list[bytes]]) -> None:
        out = np.empty((BATCH, 3, 224, 224), np.uint8)
        for number, batch in enumerate(part):
            decode_batch(batch, TRANSFORM, out=out, seeds=list(range(number * BATCH, number * BATCH + len(batch))))

    parts = [batches[index::threads] for index in range(threads)]
    workers = [threading.Thread(target=work, args=(part,)) for part in parts]
    cpu, wall = _cpu(), time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return (_cpu() - cpu) / len(payloads), len(payloads) / (time.perf_counter() - wall)


def loader_epoch(make_storage: Callable[[], object]) -> tuple[float, float]:
    """(CPU seconds per image, images/s) of one Loader epoch, from building it to its last batch."""
    cpu, wall = _cpu(), time.perf_counter()
    loader = Loader(make_storage(), batch_size=BATCH, transform=TRANSFORM, sampling=Sampling(seed=0))  # type: ignore[arg-type]
    images = sum(len(batch) for batch in loader)
    return (_cpu() - cpu) / images, images / (time.perf_counter() - wall)


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    payloads = list(iter_jpegs(args.images, 500, 375, 0))
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="stoker-overhead-") as scratch:
        for index, data in enumerate(payloads):
            folder = Path(scratch) / f"class_{index % 10}"
            folder.mkdir(exist_ok=True)
            (folder / f"{index:06d}.jpg").write_bytes(data)
        memory = {f"{index:06d}": data for index, data in enumerate(payloads)}
        labels = {key: 0 for key in memory}
        results: dict[str, list[tuple[float, float]]] = {
            "native, 1 thread": [],
            f"native, {cores} threads": [],
            "Loader, memory": [],
            "Loader, files": [],
        }
        for _ in range(args.rounds):
            results["native, 1 thread"].append(native(payloads))
            results[f"native, {cores} threads"].append(native(payloads, cores))
            results["Loader, memory"].append(loader_epoch(lambda: MemoryStorage(memory, labels)))
            results["Loader, files"].append(loader_epoch(lambda: FileStorage(scratch)))
    medians = {
        name: (statistics.median(cpu for cpu, _ in runs), statistics.median(rate for _, rate in runs)) for name, runs in results.items()
    }
    print(f"{args.images} JPEGs 500x375 -> uint8 CHW 224x224, batch {BATCH}, {cores} cores, load {os.getloadavg()[0]:.2f}")
    print("| run | CPU ms/image | images/s |\n|---|---|---|")
    for name, (cpu, rate) in medians.items():
        print(f"| {name} | {1e3 * cpu:.3f} | {rate:,.0f} |")
    base = medians["native, 1 thread"][0]
    for name in ("Loader, memory", "Loader, files"):
        print(f"{name}: overhead {100 * (medians[name][0] / base - 1):+.1f}% CPU per image over the native decode")
    ceiling = medians[f"native, {cores} threads"][1]
    print(f"Loader, files: {100 * medians['Loader, files'][1] / ceiling:.0f}% of the native decode's rate on {cores} cores")


if __name__ == "__main__":
    main()
