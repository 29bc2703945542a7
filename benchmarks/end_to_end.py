"""JPEG folder -> batches of 32 normalized 3x224x224 float32 images, end to end, one run:
stoker.Loader vs PyTorch DataLoader (2 workers, torchvision ImageFolder + transforms) vs SPDL
pipelines (simplejpeg + OpenCV decode; spdl.io decode), each in its own process so peak RSS and
CPU time are its own.

Reported: images/s, time to first batch (from constructing the loader, listing included), peak
RSS, CPU seconds per image. Targets (the Loader issue): >= 2.5x DataLoader and >= 1.6x the best
SPDL variant; RSS <= 0.5x DataLoader; first batch from a 1,000,000-sample listing in <= 1 s
(measured separately on the listing benchmark's tree, which it makes if missing).

Integrity: the same images as tar shards, read by the Loader with CRC-32 verification on (the
default) and off, alternating in one process; the ratio is what verification costs end to end
(target: under 3%).

Run:  python benchmarks/end_to_end.py [--count 3000] [--repeats 3] [--integrity-only]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stoker.bench import require_optimized_core  # noqa: E402
from stoker.bench._peers import BATCH, PEERS, run_in_subprocess  # noqa: E402


def image_folder(count: int) -> Path:
    """The generated JPEGs as an ImageFolder of 10 classes, made once in stoker's cache."""
    from stoker.bench import image_folder as make_folder

    return make_folder(count)


def first_batch_from_a_million() -> float:
    """Seconds from opening a 1,000,000-file ImageFolder (cached listing) to the first batch."""
    from listing import make_tree

    from stoker import Loader
    from stoker.storage import FileStorage
    from stoker.storage._cache import cache_dir

    root = cache_dir("listing-bench", "1000x1000")
    make_tree(root, 1000, 1000)
    FileStorage(root)  # the listing cache, as after a previous run
    started = time.perf_counter()
    loader = Loader(FileStorage(root), batch_size=BATCH)
    for _ in loader:
        break
    return time.perf_counter() - started


def integrity_cost(root: Path, repeats: int) -> dict[bool, float]:
    """Images/s of the Loader over shards of ``root``, CRC verification on and off (medians)."""
    from stoker import Loader
    from stoker.bench._peers import MEAN, STD
    from stoker.ops import ImageTransform
    from stoker.storage import FileStorage, TarShardStorage, convert_storage

    shards = root.parent / f"{root.name}-shards"
    if not (shards / "dataset.json").exists():
        with FileStorage(root) as source:
            convert_storage(source, shards, shard_size=64 << 20, progress=False)
    transform = ImageTransform(resize_shorter=256, center_crop=(224, 224), layout="CHW", dtype="float32", mean=MEAN, std=STD)
    rates: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for verify in (True, False):
            loader = Loader(TarShardStorage(shards, verify=verify), batch_size=BATCH, transform=transform, seed=0)
            started, count = time.perf_counter(), 0
            for batch in loader:
                count += len(batch)
            rates[verify].append(count / (time.perf_counter() - started))
    return {verify: statistics.median(values) for verify, values in rates.items()}


def print_integrity_cost(root: Path, repeats: int) -> None:
    rates = integrity_cost(root, repeats)
    print(
        f"\nLoader over shards, CRC-32 verified: {rates[True]:.0f} images/s; not verified: {rates[False]:.0f} images/s; "
        f"verified / not: {rates[True] / rates[False]:.3f} (target >= 0.97)"
    )


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--integrity-only", action="store_true", help="only the CRC verification on/off comparison")
    args = parser.parse_args()
    root = image_folder(args.count)
    if args.integrity_only:
        print_integrity_cost(root, args.repeats)
        return
    results: dict[str, list[dict]] = {name: [] for name in PEERS}
    for _ in range(args.repeats):
        for name in PEERS:
            try:
                results[name].append(run_in_subprocess(name, root))
            except RuntimeError as error:
                print(f"skipped: {error}", file=sys.stderr)
    print(f"\n{args.count} JPEGs 500x375 -> {BATCH} x 3x224x224 float32, {os.cpu_count()} cores, median of {args.repeats}")
    print(f"{'method':<32} {'images/s':>9} {'first batch':>12} {'peak RSS':>9} {'CPU s/img':>10}")
    medians = {}
    for name, runs in results.items():
        if not runs:
            continue
        medians[name] = {key: statistics.median(run[key] for run in runs) for key in runs[0] if key != "arrivals"}
        row = medians[name]
        print(
            f"{name:<32} {row['images_per_second']:>9.0f} {row['first_batch_seconds']:>11.2f}s {row['peak_rss_mb']:>7.0f}MB {row['cpu_seconds_per_image'] * 1e3:>8.2f}ms"
        )
    ours = medians["stoker.Loader"]
    if "PyTorch DataLoader (2 workers)" in medians:
        torch_row = medians["PyTorch DataLoader (2 workers)"]
        print(
            f"\nstoker / DataLoader: {ours['images_per_second'] / torch_row['images_per_second']:.2f}x images/s (target 2.5x), "
            f"RSS {ours['peak_rss_mb'] / torch_row['peak_rss_mb']:.2f}x (target <= 0.5x)"
        )
    spdl = [medians[name] for name in medians if name.startswith("SPDL")]
    if spdl:
        best = max(row["images_per_second"] for row in spdl)
        print(f"stoker / best SPDL: {ours['images_per_second'] / best:.2f}x (target 1.6x)")
    print_integrity_cost(root, args.repeats)
    print(f"first batch from a 1,000,000-sample listing: {first_batch_from_a_million():.2f}s (target <= 1 s)")


if __name__ == "__main__":
    main()
