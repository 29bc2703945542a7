"""The release wheel's core against the development build: is zig's C compiler as fast as gcc?

The wheel (``make wheel``) compiles libjpeg-turbo with zig's clang (``maturin build --zig``, for
glibc 2.28); ``pip install -e .`` compiles it with the system's gcc. Both run the same Rust. This
times JPEG decode + resize shorter side to 256 + center crop 224 on one core, into one batch
buffer (``decode_batch`` with one thread), in the wheel's venv and in the development venv, in
interleaved rounds, each in a process of its own pinned to CPU 0, and prints images/s and the
ratio. 500x375 JPEGs (about 45 KB, ImageNet-like) and 2048x1536 (about 1 MB, camera-like).

Run:  python benchmarks/packaging/wheel_build.py [--wheel dist/stoker-*.whl] [--count 400] [--repeats 5]
It installs the wheel into a venv of its own under the stoker cache the first time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from stoker.bench import make_jpegs
from stoker.storage import cache_dir

ROOT = Path(__file__).resolve().parents[2]

TIMED = """
import os, pathlib, sys, time
os.sched_setaffinity(0, {0})
from stoker.ops import ImageTransform, decode_batch
files = sorted(pathlib.Path(sys.argv[1]).glob("*.jpg"))
data = [path.read_bytes() for path in files]
transform = ImageTransform(resize_shorter=256, center_crop=(224, 224))
decode_batch(data[:8], transform)  # warm: the thread's decompressor, the pages of the code
start = time.perf_counter()
for first in range(0, len(data), 32):
    decode_batch(data[first:first + 32], transform, threads=1)
print(len(data) / (time.perf_counter() - start))
"""


def wheel_python(wheel: Path) -> Path:
    """A venv holding only ``wheel`` (made once per wheel file)."""
    venv = cache_dir("bench", f"wheel-venv-{wheel.stat().st_size}-{int(wheel.stat().st_mtime)}")
    python = venv / "bin" / "python"
    if not python.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], check=True)
    return python


def images_per_second(python: Path, folder: Path) -> float:
    finished = subprocess.run(
        [str(python), "-c", TIMED, str(folder)], capture_output=True, text=True, check=True, cwd=tempfile.gettempdir()
    )
    return float(finished.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, default=None, help="the wheel (default: the newest in dist/)")
    parser.add_argument("--count", type=int, default=400, help="JPEGs of each size")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds; the median is reported")
    arguments = parser.parse_args()
    wheel = arguments.wheel or max((ROOT / "dist").glob("stoker-*.whl"), key=lambda path: path.stat().st_mtime)
    builds = {"wheel (zig cc)": wheel_python(wheel), "development (gcc)": Path(sys.executable)}
    print(f"wheel: {wheel.name}; one core (CPU 0), decode + resize 256 + center crop 224, median of {arguments.repeats} rounds")
    for width, height in ((500, 375), (2048, 1536)):
        with tempfile.TemporaryDirectory() as folder:
            for index, data in enumerate(make_jpegs(arguments.count if width < 1000 else arguments.count // 4, width, height)):
                (Path(folder) / f"{index:05d}.jpg").write_bytes(data)
            rates: dict[str, list[float]] = {name: [] for name in builds}
            for _ in range(arguments.repeats):
                for name, python in builds.items():
                    rates[name].append(images_per_second(python, Path(folder)))
            medians = {name: statistics.median(values) for name, values in rates.items()}
            ratio = medians["wheel (zig cc)"] / medians["development (gcc)"]
            cells = ", ".join(f"{name} {rate:,.0f} images/s" for name, rate in medians.items())
            print(f"  {width}x{height}: {cells}; wheel / development {ratio:.3f}x")


if __name__ == "__main__":
    main()
