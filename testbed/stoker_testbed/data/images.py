"""Test images made on the fly with Pillow: every JPEG and PNG variant the decoder must handle."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from stoker.bench import natural_image


def photo(width: int = 500, height: int = 375, seed: int = 0) -> np.ndarray:
    return natural_image(np.random.default_rng(seed), width, height)


def encode(image: Image.Image | np.ndarray, format: str = "JPEG", **options: object) -> bytes:
    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    buffer = io.BytesIO()
    image.save(buffer, format=format, **options)
    return buffer.getvalue()


def jpeg(width: int = 500, height: int = 375, seed: int = 0, quality: int = 90, **options: object) -> bytes:
    return encode(photo(width, height, seed), "JPEG", quality=quality, **options)


def with_orientation(orientation: int, width: int = 60, height: int = 40) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(photo(width, height, seed=orientation), "JPEG", quality=95, exif=exif.tobytes())


def pillow_rgb(data: bytes) -> Image.Image:
    from PIL import ImageOps

    return ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")


def pillow_resize_center_crop(data: bytes, shorter: int, crop: int) -> np.ndarray:
    """torchvision's Resize(shorter) + CenterCrop(crop) on a PIL image, spelled out in Pillow."""
    image = pillow_rgb(data)
    width, height = image.size
    if width <= height:
        size = (shorter, int(shorter * height / width))
    else:
        size = (int(shorter * width / height), shorter)
    image = image.resize(size, Image.BILINEAR)
    left = int(round((size[0] - crop) / 2.0))
    top = int(round((size[1] - crop) / 2.0))
    return np.asarray(image.crop((left, top, left + crop, top + crop)))


def difference(ours: np.ndarray, reference: np.ndarray) -> tuple[float, int]:
    """(mean, max) absolute difference of two uint8 arrays of one shape."""
    assert ours.shape == reference.shape, (ours.shape, reference.shape)
    delta = np.abs(ours.astype(np.int16) - reference.astype(np.int16))
    return float(delta.mean()), int(delta.max())
