"""Image decode + resize shorter side to 256 + center crop 224: stoker vs its peers, one run.

1. One core (the process pinned to one CPU), images/s into a 224x224x3 uint8 array, on
   ImageNet-like 500x375 JPEGs (about 45 KB) and camera-like 2048x1536 ones (about 1 MB):
   stoker (one call per image), Pillow with torchvision's transforms spelled out (Resize(256) is
   Pillow's antialiased BILINEAR, CenterCrop), simplejpeg + OpenCV (INTER_AREA, antialiased; and
   INTER_LINEAR, which aliases, for reference), SPDL's spdl.io (FFmpeg). All decode with
   libjpeg-turbo but spdl.io; stoker decodes only the crop's iMCU columns and rows, at 1/2 to 1/8
   size in the DCT domain where the output allows.
2. Batches of 32 into one buffer: stoker on 2 threads vs 1 thread.
3. RandomResizedCrop(224): with and without DCT-domain downscaling, on 500x375 and 2048x1536.
4. WebP (the same photos re-encoded, lossy q90 and lossless), one core, resize 256 + center crop
   224: stoker (libwebp, built by cargo) vs Pillow (libwebp) with torchvision's transforms.

Targets (the image issue): stoker on one core >= 1.0x the fastest antialiased peer; 2 threads
>= 1.85x one thread. Each measurement is the median of `--repeats` interleaved rounds.

spdl.io needs FFmpeg's shared libraries; on Debian 12:
    apt-get install libavutil57 libavcodec59 libavformat59 libavfilter8 libswscale6 libavdevice59
Its column is left out when they are missing.

Run:  python benchmarks/images/image_decode.py [--count 3000] [--repeats 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from stoker.bench import image_folder, require_optimized_core
from stoker.ops import ImageTransform, allocate_batch, decode_batch, decode_image


def image_set(count: int, width: int = 500, height: int = 375) -> list[bytes]:
    """The bytes of ``count`` generated JPEGs (made once in stoker's cache); the large ones at a
    camera's quality (95-97, about 1 MB)."""
    quality = (95, 97) if width >= 2048 else (80, 95)
    return [path.read_bytes() for path in sorted(image_folder(count, width, height, quality=quality, progress=True).glob("*/*.jpg"))]


CENTER = ImageTransform(resize_shorter=256, center_crop=(224, 224))
CENTER_FULL_SIZE = ImageTransform(resize_shorter=256, center_crop=(224, 224), dct_scaling=False)


def shorter_side(width: int, height: int, size: int = 256) -> tuple[int, int]:
    return (size, int(size * height / width)) if width <= height else (int(size * width / height), size)


def pillow_torchvision(data: bytes) -> np.ndarray:
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    width, height = shorter_side(*image.size)
    image = image.resize((width, height), Image.BILINEAR)
    left, top = int(round((width - 224) / 2.0)), int(round((height - 224) / 2.0))
    return np.asarray(image.crop((left, top, left + 224, top + 224)))


def make_simplejpeg_opencv(interpolation: int) -> Callable[[bytes], np.ndarray]:
    import cv2
    import simplejpeg

    def run(data: bytes) -> np.ndarray:
        array = simplejpeg.decode_jpeg(data, colorspace="RGB")
        width, height = shorter_side(array.shape[1], array.shape[0])
        array = cv2.resize(array, (width, height), interpolation=interpolation)
        top, left = (height - 224) // 2, (width - 224) // 2
        return np.ascontiguousarray(array[top : top + 224, left : left + 224])

    return run


def make_spdl() -> Callable[[bytes], np.ndarray] | None:
    try:
        import spdl.io as spdl_io

        spdl_io.demux_image(image_set(1)[0])
    except Exception as error:  # missing FFmpeg libraries, or spdl not installed
        print(f"spdl.io unavailable ({str(error)[:80]}...): its column is left out", file=sys.stderr)
        return None

    def run(data: bytes) -> np.ndarray:
        # Both sets are 4:3 (500x375, 2048x1536), so Resize(256) is 341x256; FFmpeg's bilinear
        # widens its filter when shrinking, like Pillow's.
        packets = spdl_io.demux_image(data)
        frames = spdl_io.decode_packets(packets, filter_desc="scale=w=341:h=256:flags=bilinear,crop=w=224:h=224,format=pix_fmts=rgb24")
        return spdl_io.to_numpy(spdl_io.convert_frames(frames))

    return run


def rate(function: Callable[[Any], Any], items: list[Any]) -> float:
    started = time.perf_counter()
    for item in items:
        function(item)
    return len(items) / (time.perf_counter() - started)


def interleaved(methods: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):
        for name, method in methods.items():
            samples[name].append(method())
    return {name: statistics.median(values) for name, values in samples.items()}


LEFT_OUT: dict[str, str] = {}
"""Peers that cannot run here, with the reason: left out of the tables, never shown as 0."""


def one_core(images: list[bytes], repeats: int) -> dict[str, float]:
    methods: dict[str, Callable[[bytes], Any]] = {
        "stoker": lambda data: decode_image(data, CENTER),
        "stoker, dct_scaling=False": lambda data: decode_image(data, CENTER_FULL_SIZE),
        "Pillow + torchvision transforms": pillow_torchvision,
    }
    try:
        import cv2
        import simplejpeg  # noqa: F401
    except ImportError as error:
        LEFT_OUT["simplejpeg + OpenCV"] = f"not installed ({error.name}; make bench installs both)"
    else:
        cv2.setNumThreads(1)
        methods["simplejpeg + OpenCV INTER_AREA"] = make_simplejpeg_opencv(cv2.INTER_AREA)
        methods["simplejpeg + OpenCV INTER_LINEAR (aliased)"] = make_simplejpeg_opencv(cv2.INTER_LINEAR)
    spdl = make_spdl()
    if spdl is not None:
        methods["SPDL spdl.io (FFmpeg)"] = spdl
    for function in methods.values():
        function(images[0])  # warm-up: imports, thread-local buffers
    return interleaved({name: (lambda f=function: rate(f, images)) for name, function in methods.items()}, repeats)


def batches(images: list[bytes], repeats: int) -> dict[str, float]:
    out = allocate_batch(CENTER, 32)
    groups = [images[start : start + 32] for start in range(0, len(images) - 31, 32)]

    def run(threads: int) -> float:
        started = time.perf_counter()
        for group in groups:
            decode_batch(group, CENTER, out=out, threads=threads)
        return 32 * len(groups) / (time.perf_counter() - started)

    def run_pipeline(threads: int) -> float:
        # How a Loader runs it: a pipeline stage of `threads` concurrent batch ops, one buffer each.
        from stoker.pipeline import PipelineBuilder

        buffers = [allocate_batch(CENTER, 32) for _ in range(threads + 2)]

        def fill(job: tuple[int, list[bytes]]) -> int:
            index, group = job
            decode_batch(group, CENTER, out=buffers[index % len(buffers)])
            return index

        pipeline = PipelineBuilder().add_source(enumerate(groups)).pipe(fill, concurrency=threads).add_sink(1).build()
        started = time.perf_counter()
        for _ in pipeline:
            pass
        return 32 * len(groups) / (time.perf_counter() - started)

    return interleaved(
        {
            "1 thread": lambda: run(1),
            "2 threads inside one call": lambda: run(2),
            "pipeline stage, concurrency 1": lambda: run_pipeline(1),
            "pipeline stage, concurrency 2": lambda: run_pipeline(2),
        },
        repeats,
    )


def random_crops(images: list[bytes], large: list[bytes], repeats: int) -> dict[str, float]:
    with_dct = ImageTransform(random_resized_crop=(224, 224), dct_scaling=True)
    without = ImageTransform(random_resized_crop=(224, 224), dct_scaling=False)

    def run(transform: ImageTransform, items: list[bytes]) -> float:
        started = time.perf_counter()
        for index, data in enumerate(items):
            decode_image(data, transform, seed=index)
        return len(items) / (time.perf_counter() - started)

    return interleaved(
        {
            "500x375, DCT scaling off": lambda: run(without, images),
            "500x375, DCT scaling": lambda: run(with_dct, images),
            "2048x1536, DCT scaling off": lambda: run(without, large),
            "2048x1536, DCT scaling": lambda: run(with_dct, large),
        },
        repeats,
    )


def webp(images: list[bytes], repeats: int) -> dict[str, float]:
    from PIL import Image

    def reencode(data: bytes, lossless: bool) -> bytes:
        buffer = io.BytesIO()
        Image.open(io.BytesIO(data)).save(buffer, "WEBP", quality=90, lossless=lossless)
        return buffer.getvalue()

    sets = {kind: [reencode(data, kind == "lossless") for data in images[:300]] for kind in ("lossy", "lossless")}
    methods: dict[str, Callable[[], float]] = {}
    for kind, items in sets.items():
        methods[f"{kind}: stoker"] = lambda items=items: rate(lambda data: decode_image(data, CENTER), items)
        methods[f"{kind}: Pillow + torchvision transforms"] = lambda items=items: rate(pillow_torchvision, items)
    return interleaved(methods, repeats)


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000, help="500x375 JPEGs (cached in ~/.cache/stoker)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()

    images = image_set(args.count)
    large = image_set(max(20, args.count // 20), 2048, 1536)
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(affinity)})
    try:
        single = {"500x375": one_core(images, args.repeats), "2048x1536": one_core(large, args.repeats)}
        webp_rates = webp(images, args.repeats)
    finally:
        os.sched_setaffinity(0, affinity)
    batch = batches(images, args.repeats)
    crops = random_crops(images, large, args.repeats)

    for label, items in (("500x375", images), ("2048x1536", large)):
        rates = single[label]
        kilobytes = sum(len(data) for data in items) / len(items) / 1e3
        antialiased = [name for name in rates if not name.startswith("stoker") and "aliased" not in name]
        fastest = max(antialiased, key=lambda name: rates[name])
        print(f"\n1. one core, {len(items)} JPEGs {label} (about {kilobytes:.0f} KB) -> resize 256 -> center crop 224 (images/s)")
        for name, value in rates.items():
            print(f"   {name:<45} {value:>8.0f}   stoker x{rates['stoker'] / value:.2f}")
        print(f"   stoker vs the fastest antialiased peer ({fastest}): {rates['stoker'] / rates[fastest]:.2f}x")
    print(f"\n2. batches of 32, {os.cpu_count()} cores (images/s)")
    for name, value in batch.items():
        print(f"   {name:<45} {value:>8.0f}")
    print(f"   2 threads / 1 thread inside one call: {batch['2 threads inside one call'] / batch['1 thread']:.2f}x")
    print(f"   pipeline concurrency 2 / 1: {batch['pipeline stage, concurrency 2'] / batch['pipeline stage, concurrency 1']:.2f}x")
    print("\n3. RandomResizedCrop(224), one call per image (images/s)")
    for name, value in crops.items():
        print(f"   {name:<45} {value:>8.0f}")
    print(
        f"   DCT scaling gain: 500x375 {crops['500x375, DCT scaling'] / crops['500x375, DCT scaling off']:.2f}x, "
        f"2048x1536 {crops['2048x1536, DCT scaling'] / crops['2048x1536, DCT scaling off']:.2f}x"
    )
    print("\n4. WebP, one core, resize 256 -> center crop 224 (images/s)")
    for name, value in webp_rates.items():
        print(f"   {name:<45} {value:>8.0f}")
    for kind in ("lossy", "lossless"):
        print(f"   {kind}: stoker / Pillow {webp_rates[f'{kind}: stoker'] / webp_rates[f'{kind}: Pillow + torchvision transforms']:.2f}x")
    for name, reason in LEFT_OUT.items():
        print(f"\nleft out: {name}: {reason}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"one_core": single, "batches": batch, "random_resized_crop": crops, "webp": webp_rates}, file, indent=2)


if __name__ == "__main__":
    main()
