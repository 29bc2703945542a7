"""Make natural-looking JPEGs for benchmarks and tests: no dataset to download.

Pure noise is the worst case for a JPEG decoder (every coefficient non-zero) and nothing like a
photo. Photos have a 1/f amplitude spectrum: most energy in broad shapes, less in fine texture.
We synthesize exactly that: per-channel 1/f noise (correlated across channels, so colours look
like colours), a few soft-edged shapes for edges, and a light-to-dark gradient, then encode at a
random quality in [80, 95] as JPEG encoders in the wild do.

Run:  python benchmarks/make_images.py DIR [--count 3000] [--size 500x375] [--seed 0]
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np


def natural_image(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """An HxWx3 uint8 image with a photo-like 1/f spectrum."""
    frequency_y = np.fft.fftfreq(height)[:, None]
    frequency_x = np.fft.rfftfreq(width)[None, :]
    radius = np.sqrt(frequency_x**2 + frequency_y**2)
    radius[0, 0] = 1.0
    amplitude = 1.0 / radius**1.25
    amplitude[0, 0] = 0.0
    shared = rng.normal(size=radius.shape) + 1j * rng.normal(size=radius.shape)
    channels = []
    for _ in range(3):
        own = rng.normal(size=radius.shape) + 1j * rng.normal(size=radius.shape)
        field = np.fft.irfft2((0.8 * shared + 0.45 * own) * amplitude, s=(height, width))
        channels.append(field / (np.abs(field).max() + 1e-9))
    image = np.stack(channels, axis=-1) * 0.45 + rng.uniform(0.3, 0.7, size=3)
    # Soft-edged discs: the edges a decoder meets in real photos (computed in their bounding box).
    image = image.astype(np.float32)
    for _ in range(rng.integers(2, 6)):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        size = rng.uniform(0.05, 0.3) * min(width, height)
        top, bottom = int(max(0, cy - size - 12)), int(min(height, cy + size + 12))
        left, right = int(max(0, cx - size - 12)), int(min(width, cx + size + 12))
        if top >= bottom or left >= right:
            continue
        yy, xx = np.mgrid[top:bottom, left:right].astype(np.float32)
        distance = np.clip((np.hypot(yy - cy, xx - cx) - size) / 2.0, -50, 50)
        mask = (1.0 / (1.0 + np.exp(distance)))[..., None]
        colour = rng.uniform(0, 1, size=3).astype(np.float32)
        region = image[top:bottom, left:right]
        image[top:bottom, left:right] = region * (1 - mask) + colour * mask
    image *= np.linspace(1.0, rng.uniform(0.6, 1.0), height, dtype=np.float32)[:, None, None]
    return np.clip(image * 255, 0, 255).astype(np.uint8)


def encode_jpeg(pixels: np.ndarray, quality: int, **options: object) -> bytes:
    """JPEG bytes of an HxWx3 (or HxW) uint8 array, through Pillow."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=quality, **options)
    return buffer.getvalue()


def make_jpegs(count: int, width: int = 500, height: int = 375, seed: int = 0) -> list[bytes]:
    """``count`` natural-looking JPEGs, quality 80-95, reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    return [encode_jpeg(natural_image(rng, width, height), int(rng.integers(80, 96))) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--size", default="500x375", help="WIDTHxHEIGHT")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    args.directory.mkdir(parents=True, exist_ok=True)
    for index, data in enumerate(make_jpegs(args.count, width, height, args.seed)):
        (args.directory / f"{index:07d}.jpg").write_bytes(data)
    print(f"wrote {args.count} JPEGs of {width}x{height} to {args.directory}")


if __name__ == "__main__":
    main()
