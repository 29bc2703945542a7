"""Natural-looking JPEGs made on the spot, so `stoker bench` and the benchmarks need no download.

Pure noise is the worst case for a JPEG decoder and nothing like a photo. Photos have a 1/f
amplitude spectrum: most energy in broad shapes, less in fine texture. We synthesize that:
per-channel 1/f noise (correlated across channels, so colours look like colours), a few
soft-edged discs for edges, a light-to-dark gradient, encoded at a random quality in [80, 95].
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .. import _native
from ..storage import cache_dir

__all__ = ["encode_jpeg", "image_folder", "make_jpegs", "natural_image"]


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
    image = (np.stack(channels, axis=-1) * 0.45 + rng.uniform(0.3, 0.7, size=3)).astype(np.float32)
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
        image[top:bottom, left:right] = image[top:bottom, left:right] * (1 - mask) + colour * mask
    image *= np.linspace(1.0, rng.uniform(0.6, 1.0), height, dtype=np.float32)[:, None, None]
    return np.clip(image * 255, 0, 255).astype(np.uint8)


def encode_jpeg(pixels: np.ndarray, quality: int) -> bytes:
    """JPEG bytes of an HxWx3 uint8 array, by the native core's libjpeg-turbo with Pillow's default
    settings, so `stoker bench` makes its images where nothing but stoker is installed."""
    return _native.encode_jpeg(np.ascontiguousarray(pixels, dtype=np.uint8), quality)


def iter_jpegs(count: int, width: int = 500, height: int = 375, seed: int = 0, quality: tuple[int, int] = (80, 95)) -> Iterator[bytes]:
    """``count`` natural-looking JPEGs, of a quality drawn in ``quality`` (inclusive; 80-95 is
    about 45 KB at 500x375, 95-97 about 1 MB at 2048x1536, like a camera's), reproducible from
    ``seed``, one at a time."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield encode_jpeg(natural_image(rng, width, height), int(rng.integers(quality[0], quality[1] + 1)))


def make_jpegs(count: int, width: int = 500, height: int = 375, seed: int = 0) -> list[bytes]:
    """``count`` natural-looking JPEGs, quality 80-95, reproducible from ``seed``."""
    return list(iter_jpegs(count, width, height, seed))


def image_folder(
    count: int,
    width: int = 500,
    height: int = 375,
    classes: int = 10,
    seed: int = 0,
    *,
    quality: tuple[int, int] = (80, 95),
    progress: bool = False,
) -> Path:
    """An ImageFolder of ``count`` generated JPEGs (see `iter_jpegs`) in stoker's cache, made
    once (about 40 ms an image at 500x375: 2,000 take a minute and a half); ``progress`` shows a
    bar while making them."""
    name = f"folder-{count}-{width}x{height}-{classes}-seed{seed}"
    if quality != (80, 95):
        name += f"-q{quality[0]}-{quality[1]}"
    root = cache_dir("bench", name)
    if (root / ".complete").exists():
        return root
    from tqdm import tqdm

    images = iter_jpegs(count, width, height, seed, quality)
    bar = tqdm(images, total=count, unit="image", desc="generating JPEGs (once; cached)", disable=not progress, file=sys.stderr)
    for index, data in enumerate(bar):
        folder = root / f"class_{index % classes:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"{index:07d}.jpg").write_bytes(data)
    (root / ".complete").touch()
    return root
