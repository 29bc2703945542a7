"""JPEG folder -> batches of 32 normalized 3x224x224 float32 images, end to end, one run:
stoker.Loader vs PyTorch DataLoader (2 workers, torchvision ImageFolder + transforms) vs SPDL
pipelines (simplejpeg + OpenCV decode; spdl.io decode), each in its own process so peak RSS and
CPU time are its own.

Reported: images/s, time to first batch (from constructing the loader, listing included), peak
RSS, CPU seconds per image. Targets (the Loader issue): >= 2.5x DataLoader and >= 1.6x the best
SPDL variant; RSS <= 0.5x DataLoader; first batch from a 1,000,000-sample listing in <= 1 s
(measured separately on the listing benchmark's tree, which it makes if missing).

Run:  python benchmarks/end_to_end.py [--count 3000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCH = 32


def image_folder(count: int) -> Path:
    """The generated JPEGs as an ImageFolder of 10 classes (hard links into the image cache)."""
    from _image_set import image_set
    from stoker.storage._cache import cache_dir

    images = image_set(count)
    root = cache_dir("e2e", str(count))
    if not (root / ".complete").exists():
        for index, data in enumerate(images):
            folder = root / f"class_{index % 10}"
            folder.mkdir(exist_ok=True)
            (folder / f"{index:07d}.jpg").write_bytes(data)
        (root / ".complete").touch()
    return root


def run_stoker(root: Path) -> tuple[float, int]:
    from stoker import Loader
    from stoker.ops import ImageTransform
    from stoker.storage import FileStorage

    started = time.perf_counter()
    transform = ImageTransform(resize_shorter=256, center_crop=(224, 224), layout="CHW", dtype="float32", mean=MEAN, std=STD)
    loader = Loader(FileStorage(root), batch_size=BATCH, transform=transform, seed=0)
    first = None
    count = 0
    for batch in loader:
        first = first or time.perf_counter() - started
        count += len(batch)
    return first or 0.0, count


def run_torch(root: Path) -> tuple[float, int]:
    import torch
    from torchvision import datasets, transforms

    started = time.perf_counter()
    transform = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    loader = torch.utils.data.DataLoader(datasets.ImageFolder(str(root), transform=transform), batch_size=BATCH, shuffle=True, num_workers=2)
    first = None
    count = 0
    for images, _ in loader:
        first = first or time.perf_counter() - started
        count += len(images)
    return first or 0.0, count


def _normalize_chw(array):  # type: ignore[no-untyped-def]
    import numpy as np

    chw = array.transpose(2, 0, 1).astype(np.float32) / 255.0
    return (chw - np.array(MEAN, np.float32)[:, None, None]) / np.array(STD, np.float32)[:, None, None]


def run_spdl(root: Path, decoder: str) -> tuple[float, int]:
    import cv2
    import numpy as np
    from spdl.pipeline import PipelineBuilder

    cv2.setNumThreads(1)
    started = time.perf_counter()
    paths = sorted(str(path) for path in root.glob("class_*/*.jpg"))
    if decoder == "simplejpeg":
        import simplejpeg

        def load(path: str):  # type: ignore[no-untyped-def]
            with open(path, "rb") as file:
                array = simplejpeg.decode_jpeg(file.read(), colorspace="RGB")
            height, width = array.shape[:2]
            size = (256, int(256 * height / width)) if width <= height else (int(256 * width / height), 256)
            array = cv2.resize(array, size, interpolation=cv2.INTER_AREA)
            top, left = (size[1] - 224) // 2, (size[0] - 224) // 2
            return _normalize_chw(array[top : top + 224, left : left + 224])
    else:
        import spdl.io

        def load(path: str):  # type: ignore[no-untyped-def]
            packets = spdl.io.demux_image(path)
            frames = spdl.io.decode_packets(packets, filter_desc="scale=w=341:h=256:flags=bilinear,crop=w=224:h=224,format=pix_fmts=rgb24")
            return _normalize_chw(spdl.io.to_numpy(spdl.io.convert_frames(frames)))

    pipeline = (
        PipelineBuilder().add_source(paths).pipe(load, concurrency=2).aggregate(BATCH).pipe(np.stack).add_sink(3).build(num_threads=2)
    )
    first = None
    count = 0
    with pipeline.auto_stop():
        for batch in pipeline:
            first = first or time.perf_counter() - started
            count += len(batch)
    return first or 0.0, count


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


METHODS = {
    "stoker.Loader": run_stoker,
    "PyTorch DataLoader (2 workers)": run_torch,
    "SPDL + simplejpeg/OpenCV": lambda root: run_spdl(root, "simplejpeg"),
    "SPDL + spdl.io": lambda root: run_spdl(root, "spdl.io"),
}


def child(method: str, root: Path) -> None:
    started = time.perf_counter()
    first, count = METHODS[method](root)
    seconds = time.perf_counter() - started
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({
        "images_per_second": count / seconds,
        "first_batch_seconds": first,
        "peak_rss_mb": (own.ru_maxrss + children.ru_maxrss) / 1024,
        "cpu_seconds_per_image": (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime) / count,
    }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, Path(args.root))
        return
    root = image_folder(args.count)
    results: dict[str, list[dict]] = {name: [] for name in METHODS}
    for _ in range(args.repeats):
        for name in METHODS:
            process = subprocess.run([sys.executable, __file__, "--child", name, "--root", str(root)], capture_output=True, text=True)
            if process.returncode != 0:
                print(f"{name} failed: {process.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                continue
            results[name].append(json.loads(process.stdout.strip().splitlines()[-1]))
    print(f"\n{args.count} JPEGs 500x375 -> {BATCH} x 3x224x224 float32, {os.cpu_count()} cores, median of {args.repeats}")
    print(f"{'method':<32} {'images/s':>9} {'first batch':>12} {'peak RSS':>9} {'CPU s/img':>10}")
    medians = {}
    for name, runs in results.items():
        if not runs:
            continue
        medians[name] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        row = medians[name]
        print(f"{name:<32} {row['images_per_second']:>9.0f} {row['first_batch_seconds']:>11.2f}s {row['peak_rss_mb']:>7.0f}MB {row['cpu_seconds_per_image'] * 1e3:>8.2f}ms")
    ours = medians["stoker.Loader"]
    if "PyTorch DataLoader (2 workers)" in medians:
        torch_row = medians["PyTorch DataLoader (2 workers)"]
        print(f"\nstoker / DataLoader: {ours['images_per_second'] / torch_row['images_per_second']:.2f}x images/s (target 2.5x), "
              f"RSS {ours['peak_rss_mb'] / torch_row['peak_rss_mb']:.2f}x (target <= 0.5x)")
    spdl = [medians[name] for name in medians if name.startswith("SPDL")]
    if spdl:
        best = max(row["images_per_second"] for row in spdl)
        print(f"stoker / best SPDL: {ours['images_per_second'] / best:.2f}x (target 1.6x)")
    print(f"first batch from a 1,000,000-sample listing: {first_batch_from_a_million():.2f}s (target <= 1 s)")


if __name__ == "__main__":
    main()
