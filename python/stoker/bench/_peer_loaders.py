"""The loaders `stoker bench` and `benchmarks/images/end_to_end.py` compare, each written as a competent
user of it would: resize the shorter side to 256, center crop 224, batches of 32, in one of two
outputs every method produces alike:

- ``uint8``: contiguous (32, 3, 224, 224) uint8 batches, the headline (normalization belongs on
  the accelerator, one fused op over the batch);
- ``float32``: the same, normalized with ImageNet's mean and std on the CPU.

Each function runs one epoch over an ImageFolder and records when each batch arrived.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..loader import Sampling

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCH = 32
OUTPUTS = ("uint8", "float32")


class Arrivals:
    """When each batch arrived: (seconds since the start, images so far), and the totals. The
    start is when the loader is about to be built, after its imports: what is timed is the
    loader's own work for one epoch, start-up included (each run_* function creates its
    Arrivals right after importing)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.cpu_at_start = process_cpu_seconds()
        self.count = 0
        self.times: list[tuple[float, int]] = []

    def add(self, images: int) -> None:
        self.count += images
        self.times.append((time.perf_counter() - self.started, self.count))

    @property
    def first(self) -> float:
        """Seconds to the first batch (0 when none came)."""
        return self.times[0][0] if self.times else 0.0

    @property
    def rate(self) -> float:
        """Images per second over the epoch, from the start to the last batch. (From the first
        batch instead would credit a loader for the batches it prefetched before it, and a
        loader that prefetches nothing would look slower than it is.)"""
        return self.count / self.times[-1][0] if self.times else 0.0


def process_cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (DataLoader workers) so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def image_paths(root: Path) -> list[str]:
    return sorted(str(path) for path in root.glob("*/*.jpg"))


def shorter_side(width: int, height: int, size: int = 256) -> tuple[int, int]:
    """torchvision's Resize(int) output (width, height)."""
    return (size, int(size * height / width)) if width <= height else (int(size * width / height), size)


def finish_batch(images: list[Any], output: str) -> Any:
    """HxWx3 uint8 crops to one contiguous (N, 3, H, W) batch of the asked output."""
    import numpy as np

    batch = np.ascontiguousarray(np.stack(images).transpose(0, 3, 1, 2))
    if output == "uint8":
        return batch
    mean = np.array(MEAN, np.float32)[None, :, None, None]
    std = np.array(STD, np.float32)[None, :, None, None]
    return (batch.astype(np.float32) / 255.0 - mean) / std


def run_stoker(root: Path, output: str) -> Arrivals:
    from ..loader import Loader
    from ..ops import ImageTransform
    from ..storage import FileStorage

    arrivals = Arrivals()
    if output == "float32":
        transform = ImageTransform(resize_shorter=256, center_crop=(224, 224), layout="CHW", dtype="float32", mean=MEAN, std=STD)
    else:
        transform = ImageTransform(resize_shorter=256, center_crop=(224, 224), layout="CHW")
    loader = Loader(FileStorage(root), batch_size=BATCH, transform=transform, sampling=Sampling(seed=0))
    for batch in loader:
        arrivals.add(len(batch))
    return arrivals


def run_torch(root: Path, output: str, workers: int) -> Arrivals:
    """torchvision's ImageFolder recipe (PIL decode, antialiased Resize, CenterCrop)."""
    import torch
    from torchvision import datasets, transforms

    arrivals = Arrivals()
    to_output = [transforms.PILToTensor()] if output == "uint8" else [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    transform = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), *to_output])
    loader = torch.utils.data.DataLoader(
        datasets.ImageFolder(str(root), transform=transform),
        batch_size=BATCH,
        shuffle=True,
        num_workers=workers,
        persistent_workers=False,
        prefetch_factor=2,
    )
    for images, _ in loader:
        arrivals.add(len(images))
    return arrivals


def simplejpeg_opencv(interpolation_name: str) -> Callable[[str], Any]:
    """Read, decode with simplejpeg (libjpeg-turbo), resize with OpenCV, center crop: HxWx3."""
    import cv2
    import simplejpeg

    cv2.setNumThreads(1)  # the loader's threads are the parallelism; OpenCV's own would fight them
    interpolation = getattr(cv2, interpolation_name)

    def load(path: str) -> Any:
        with open(path, "rb") as file:
            array = simplejpeg.decode_jpeg(file.read(), colorspace="RGB")
        size = shorter_side(array.shape[1], array.shape[0])
        array = cv2.resize(array, size, interpolation=interpolation)
        top, left = int(round((size[1] - 224) / 2.0)), int(round((size[0] - 224) / 2.0))
        return array[top : top + 224, left : left + 224]

    return load


def spdl_io_decoder() -> Callable[[str], Any]:
    """Decode and resize inside FFmpeg through spdl.io (bilinear, widened when shrinking)."""
    import spdl.io

    def load(path: str) -> Any:
        # Both generated sets are 4:3 (500x375, 2048x1536): Resize(256) gives 341x256.
        packets = spdl.io.demux_image(path)
        frames = spdl.io.decode_packets(packets, filter_desc="scale=w=341:h=256:flags=bilinear,crop=w=224:h=224,format=pix_fmts=rgb24")
        return spdl.io.to_numpy(spdl.io.convert_frames(frames))

    return load


def run_spdl(root: Path, output: str, decoder: str, threads: int = 2) -> Arrivals:
    """SPDL's pipeline as its docs build one: a concurrent load stage (``threads`` at once, on
    as many pipeline threads), aggregate, collate."""
    from spdl.pipeline import PipelineBuilder

    load = spdl_io_decoder() if decoder == "spdl.io" else simplejpeg_opencv(decoder)  # imports
    arrivals = Arrivals()
    builder: Any = PipelineBuilder()  # typed where spdl is installed, unknown where not
    pipeline = (
        builder.add_source(image_paths(root))
        .pipe(load, concurrency=threads)
        .aggregate(BATCH)
        .pipe(lambda images: finish_batch(images, output))
        .add_sink(3)
        .build(num_threads=threads)
    )
    with pipeline.auto_stop():
        for batch in pipeline:
            arrivals.add(len(batch))
    return arrivals


def run_thread_pool(root: Path, output: str) -> Arrivals:
    """The bare ceiling: a ThreadPoolExecutor(2) mapping simplejpeg + OpenCV INTER_LINEAR
    (aliased, the cheapest resize) over each batch's paths; no pipeline, no sampler."""
    from concurrent.futures import ThreadPoolExecutor

    load = simplejpeg_opencv("INTER_LINEAR")  # imports
    arrivals = Arrivals()
    paths = image_paths(root)
    with ThreadPoolExecutor(2) as pool:
        for start in range(0, len(paths), BATCH):
            finish_batch(list(pool.map(load, paths[start : start + BATCH])), output)
            arrivals.add(len(paths[start : start + BATCH]))
    return arrivals


def run_dali(root: Path, output: str) -> Arrivals:
    """NVIDIA DALI's CPU pipeline in its best configuration on a machine without a GPU: its own
    file reader (shuffled), ``fn.decoders.image(device="cpu")``, an antialiased
    ``fn.resize(resize_shorter=256)`` and ``fn.crop_mirror_normalize`` to 224x224 CHW (normalizing
    for float32), ``num_threads`` = the cores this process may use, prefetch queue depth 3 (tuned:
    1,160 images/s against 1,067 at its default 2 and 1,110 with a third thread, on 2 cores). Each batch is copied out as one contiguous array, as
    every other method delivers it; the reader's wrap-around padding of the last batch is not
    counted."""
    import importlib
    import os

    # DALI's stubs say device_id must be an int; None is its documented CPU-only mode.
    dali: Any = importlib.import_module("nvidia.dali")
    fn, types = dali.fn, dali.types
    arrivals = Arrivals()
    normalize = (
        {"dtype": types.UINT8}
        if output == "uint8"
        else {"dtype": types.FLOAT, "mean": [255 * m for m in MEAN], "std": [255 * s for s in STD]}
    )

    @dali.pipeline_def(batch_size=BATCH, num_threads=len(os.sched_getaffinity(0)), device_id=None, prefetch_queue_depth=3)
    def pipeline() -> Any:
        encoded, labels = fn.readers.file(file_root=str(root), random_shuffle=True, name="Reader")
        images = fn.decoders.image(encoded, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_shorter=256, antialias=True)
        return fn.crop_mirror_normalize(images, crop=(224, 224), output_layout="CHW", **normalize), labels

    built = pipeline()
    built.build()
    total = built.epoch_size("Reader")
    while arrivals.count < total:
        images, _ = built.run()
        batch = images.as_array()
        arrivals.add(min(len(batch), total - arrivals.count))
    return arrivals
