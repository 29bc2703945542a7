"""The peers `stoker bench` and `benchmarks/end_to_end.py` compare with, each run in its own
process (``python -m stoker.bench._peers METHOD ROOT``) so peak RSS and CPU time are its own:
PyTorch DataLoader (2 workers, torchvision ImageFolder and transforms) and SPDL pipelines
(simplejpeg + OpenCV, or spdl.io). Every method turns the JPEG folder into batches of 32
normalized 3x224x224 float32 images."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._run import thin

__all__ = ["PEERS", "available_peers", "run_in_subprocess"]

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCH = 32


class Arrivals:
    """When each batch arrived: (seconds since the start, images so far), and the totals."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.count = 0
        self.times: list[tuple[float, int]] = []

    def add(self, images: int) -> None:
        self.count += images
        self.times.append((time.perf_counter() - self.started, self.count))

    @property
    def first(self) -> float:
        """Seconds to the first batch (0 when none came)."""
        return self.times[0][0] if self.times else 0.0


def run_stoker(root: Path) -> Arrivals:
    from ..loader import Loader
    from ..ops import ImageTransform
    from ..storage import FileStorage

    arrivals = Arrivals()
    transform = ImageTransform(resize_shorter=256, center_crop=(224, 224), layout="CHW", dtype="float32", mean=MEAN, std=STD)
    loader = Loader(FileStorage(root), batch_size=BATCH, transform=transform, seed=0)
    for batch in loader:
        arrivals.add(len(batch))
    return arrivals


def run_torch(root: Path) -> Arrivals:
    import torch
    from torchvision import datasets, transforms

    arrivals = Arrivals()
    transform = transforms.Compose(
        [transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    )
    loader = torch.utils.data.DataLoader(
        datasets.ImageFolder(str(root), transform=transform), batch_size=BATCH, shuffle=True, num_workers=2
    )
    for images, _ in loader:
        arrivals.add(len(images))
    return arrivals


def _normalize_chw(array: Any) -> Any:
    import numpy as np

    chw = array.transpose(2, 0, 1).astype(np.float32) / 255.0
    return (chw - np.array(MEAN, np.float32)[:, None, None]) / np.array(STD, np.float32)[:, None, None]


def run_spdl(root: Path, decoder: str) -> Arrivals:
    import cv2
    import numpy as np
    from spdl.pipeline import PipelineBuilder

    cv2.setNumThreads(1)
    arrivals = Arrivals()
    paths = sorted(str(path) for path in root.glob("*/*.jpg"))
    if decoder == "simplejpeg":
        import simplejpeg

        def load(path: str) -> Any:
            with open(path, "rb") as file:
                array = simplejpeg.decode_jpeg(file.read(), colorspace="RGB")
            height, width = array.shape[:2]
            size = (256, int(256 * height / width)) if width <= height else (int(256 * width / height), 256)
            array = cv2.resize(array, size, interpolation=cv2.INTER_AREA)
            top, left = (size[1] - 224) // 2, (size[0] - 224) // 2
            return _normalize_chw(array[top : top + 224, left : left + 224])
    else:
        import spdl.io

        def load(path: str) -> Any:
            # The generated images are 500x375: Resize(256) gives 341x256.
            packets = spdl.io.demux_image(path)
            frames = spdl.io.decode_packets(packets, filter_desc="scale=w=341:h=256:flags=bilinear,crop=w=224:h=224,format=pix_fmts=rgb24")
            return _normalize_chw(spdl.io.to_numpy(spdl.io.convert_frames(frames)))

    pipeline = (
        PipelineBuilder().add_source(paths).pipe(load, concurrency=2).aggregate(BATCH).pipe(np.stack).add_sink(3).build(num_threads=2)
    )
    with pipeline.auto_stop():
        for batch in pipeline:
            arrivals.add(len(batch))
    return arrivals


PEERS = {
    "stoker.Loader": run_stoker,
    "PyTorch DataLoader (2 workers)": run_torch,
    "SPDL + simplejpeg/OpenCV": lambda root: run_spdl(root, "simplejpeg"),
    "SPDL + spdl.io": lambda root: run_spdl(root, "spdl.io"),
}

_REQUIRES = {
    "PyTorch DataLoader (2 workers)": ("torch", "torchvision"),
    "SPDL + simplejpeg/OpenCV": ("spdl.pipeline", "simplejpeg", "cv2"),
    "SPDL + spdl.io": ("spdl.pipeline", "spdl.io"),
}


def available_peers() -> dict[str, str | None]:
    """Each peer and why it cannot run here (None when it can)."""
    import importlib.util

    reasons: dict[str, str | None] = {}
    for name in PEERS:
        missing = [module for module in _REQUIRES.get(name, ()) if importlib.util.find_spec(module.split(".")[0]) is None]
        reasons[name] = f"not installed: {', '.join(missing)}" if missing else None
    return reasons


def run_in_subprocess(name: str, root: Path, timeout: float = 1800) -> dict[str, Any]:
    """Run one method in a fresh process; its measurements as a dict.

    Raises:
        RuntimeError: The method failed or delivered nothing; the message gives its first error
            line (a peer may log per-sample errors and go on) and how it ended.
    """
    process = subprocess.run(
        [sys.executable, "-m", "stoker.bench._peers", name, str(root)], capture_output=True, text=True, timeout=timeout
    )
    if process.returncode != 0:
        lines = process.stderr.strip().splitlines() or ["no output"]
        first_error = next((line.strip() for line in lines if re.match(r"\s*[\w.]+(Error|Exception): ", line)), None)
        ending = lines[-1].strip()
        reason = ending if first_error is None or first_error == ending else f"{ending}; first error: {first_error[:200]}"
        raise RuntimeError(f"{name}: {reason}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def _child(name: str, root: Path) -> None:
    from ._memory import PeakMemory

    started = time.perf_counter()
    with PeakMemory() as peak:
        arrivals = PEERS[name](root)
    count = arrivals.count
    if count == 0:  # e.g. every sample failed inside a pipeline that logs and drops them
        sys.exit("delivered no images")
    seconds = time.perf_counter() - started
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    print(
        json.dumps(
            {
                "images_per_second": count / seconds,
                "first_batch_seconds": arrivals.first,
                "peak_rss_mb": peak.megabytes,
                "cpu_seconds_per_image": cpu / max(count, 1),
                "cpu_percent": 100 * cpu / seconds,
                "arrivals": thin(arrivals.times),
            }
        )
    )


if __name__ == "__main__":
    _child(sys.argv[1], Path(sys.argv[2]))
