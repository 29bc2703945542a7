"""JPEG folder -> batches of 32 x 3x224x224 (Resize(256) + CenterCrop(224)), end to end, one run:
stoker.Loader vs PyTorch DataLoader (2 and 4 workers, torchvision's ImageFolder and transforms),
SPDL pipelines (simplejpeg + OpenCV INTER_LINEAR and INTER_AREA; spdl.io when FFmpeg's libraries
load) and the bare ceiling, a ThreadPoolExecutor(2) running simplejpeg + OpenCV INTER_LINEAR.
Each method runs in its own process, so peak RSS and CPU time are its own, into the same output:

- uint8 CHW batches (the headline: normalization belongs on the accelerator);
- float32 CHW normalized on the CPU (the second table).

Two image sets: ImageNet-like (500x375, about 45 KB) and camera-like (2048x1536, about 1 MB),
where decoding at reduced size pays. images/s is one epoch from building the loader (after its
imports) to its last batch; CPU is counted over the same span, worker processes included. Rounds
are interleaved and each method's median is shown.

Targets (the image-path issue), uint8, ImageNet-like: stoker >= 1.2x the bare ThreadPool ceiling,
>= 3x the better DataLoader, >= 1.8x the best SPDL setup.

Also: what CRC-32 verification of shards costs end to end (target: under 3%), and the first batch
from a 1,000,000-sample listing (target <= 1 s).

Run:  python benchmarks/images/end_to_end.py [--count 3000] [--large-count 300] [--repeats 3] [--integrity-only]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from stoker.bench import BATCH, compare, format_comparison, image_folder, require_optimized_core
from stoker.loader import Sampling


def first_batch_from_a_million() -> float:
    """Seconds from opening a 1,000,000-file ImageFolder (cached listing) to the first batch."""
    from stoker import Loader
    from stoker.storage import FileStorage, cache_dir
    from stoker_testbed.data.image_trees import make_empty_image_tree

    root = cache_dir("listing-bench", "1000x1000")
    make_empty_image_tree(root, 1000, 1000)
    FileStorage(root)  # the listing cache, as after a previous run
    started = time.perf_counter()
    loader = Loader(FileStorage(root), batch_size=BATCH)
    for _ in loader:
        break
    return time.perf_counter() - started


def integrity_cost(root: Path, repeats: int) -> dict[bool, float]:
    """Images/s of the Loader over shards of ``root``, CRC verification on and off (medians)."""
    from stoker import Loader
    from stoker.bench import MEAN, STD
    from stoker.ingest import convert_storage
    from stoker.ops import ImageTransform
    from stoker.storage import FileStorage, TarShardStorage

    shards = root.parent / f"{root.name}-shards"
    if not (shards / "dataset.json").exists():
        with FileStorage(root) as source:
            convert_storage(source, shards, shard_size=64 << 20, progress=False)
    transform = ImageTransform(resize_shorter=256, center_crop=(224, 224), layout="CHW", dtype="float32", mean=MEAN, std=STD)
    rates: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for verify in (True, False):
            loader = Loader(TarShardStorage(shards, verify=verify), batch_size=BATCH, transform=transform, sampling=Sampling(seed=0))
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


def folder_bytes(root: Path) -> float:
    """Mean file size in KB."""
    sizes = [path.stat().st_size for path in root.glob("*/*.jpg")]
    return sum(sizes) / len(sizes) / 1e3


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3000, help="500x375 JPEGs")
    parser.add_argument("--large-count", type=int, default=300, help="2048x1536 JPEGs (0: skip the set)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--integrity-only", action="store_true", help="only the CRC verification on/off comparison")
    args = parser.parse_args()
    root = image_folder(args.count, progress=True)
    if args.integrity_only:
        print_integrity_cost(root, args.repeats)
        return
    sets = [(f"{args.count} JPEGs 500x375", root)]
    if args.large_count:
        sets.append((f"{args.large_count} JPEGs 2048x1536", image_folder(args.large_count, 2048, 1536, quality=(95, 97), progress=True)))
    for label, folder in sets:
        comparison = compare(folder, repeats=args.repeats)
        print(
            f"\n== {label}, about {folder_bytes(folder):.0f} KB each -> {BATCH} x 3x224x224; {os.cpu_count()} cores; median of {args.repeats}"
        )
        print(format_comparison(comparison))
    print_integrity_cost(root, args.repeats)
    print(f"first batch from a 1,000,000-sample listing: {first_batch_from_a_million():.2f}s (target <= 1 s)")


if __name__ == "__main__":
    main()
