"""How long FileStorage takes to list an ImageFolder of 1,000,000 files, cold and from cache.

The tree (1000 classes x 1000 empty files) is made once in ~/.cache/stoker/listing-bench.
Compared with torchvision's way (os.walk per class, one thread), spelled out here so torch is not
needed. Target (local storage issue): fast, and cached.

Run:  python benchmarks/storage/listing.py [--classes 1000] [--per-class 1000]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from stoker.bench import require_optimized_core
from stoker.storage import IMAGE_EXTENSIONS, FileStorage, cache_dir
from stoker_testbed.data.image_trees import make_empty_image_tree


def torchvision_style(root: Path) -> int:
    """What torchvision's make_dataset does: sorted classes, os.walk each, filter extensions."""
    count = 0
    for name in sorted(entry.name for entry in os.scandir(root) if entry.is_dir()):
        for _folder, _, files in sorted(os.walk(root / name, followlinks=True)):
            count += sum(1 for file in sorted(files) if file.lower().endswith(IMAGE_EXTENSIONS))
    return count


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--per-class", type=int, default=1000)
    args = parser.parse_args()
    root = cache_dir("listing-bench", f"{args.classes}x{args.per_class}")
    make_empty_image_tree(root, args.classes, args.per_class)
    (cache_dir("listings")).mkdir(exist_ok=True)

    started = time.perf_counter()
    expected = torchvision_style(root)
    torchvision_seconds = time.perf_counter() - started
    started = time.perf_counter()
    cold = FileStorage(root, cache=False)
    cold_seconds = time.perf_counter() - started
    FileStorage(root)  # fills the cache
    started = time.perf_counter()
    cached = FileStorage(root)
    cached_seconds = time.perf_counter() - started
    assert len(cold) == len(cached) == expected, (len(cold), len(cached), expected)
    print(f"listing {expected} files in {args.classes} class folders")
    print(f"  torchvision-style os.walk, 1 thread   {torchvision_seconds:6.2f} s")
    print(f"  stoker Rust parallel walk, no cache   {cold_seconds:6.2f} s  ({torchvision_seconds / cold_seconds:.1f}x)")
    print(f"  stoker from cache                     {cached_seconds:6.2f} s  ({torchvision_seconds / cached_seconds:.1f}x)")


if __name__ == "__main__":
    main()
