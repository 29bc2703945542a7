"""Image decode and transform, in the native core without the GIL.

One call decodes JPEG, PNG or WebP bytes, turns them upright (EXIF), crops and resizes them with
an antialiasing filter, flips, normalizes, and writes each image once, into its slot of a batch
buffer that may be yours (`stoker.ops.decode_batch`; a numpy array, or a page-locked torch tensor
through ``.numpy()``). The GIL is released for the whole call, so a pipeline stage running it in
threads scales with the cores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._native import ImageTransform
from .._native import decode_image as _decode_image
from .._native import image_sizes as _image_sizes
from ..errors import ConfigurationError, ImageDecodeError
from .batch import MASK64, as_bytes

__all__ = ["ImageSizes", "ImageTransform", "decode_image", "image_sizes"]


def decode_image(data: Any, transform: ImageTransform | None = None, *, seed: int = 0, name: str | None = None) -> np.ndarray:
    """Decode and transform one image into a new array.

    Args:
        data: Encoded JPEG or PNG (bytes, bytearray, or any buffer).
        transform: What to do; default: decode only, uint8 HWC RGB.
        seed: Seeds the random crop and flip of this image.
        name: How errors name the image (default: "image").

    Returns:
        HWC (or CHW) array of the transform's dtype.

    Raises:
        ImageDecodeError: The data is not a decodable image, naming it.
    """
    try:
        return _decode_image(as_bytes(data), transform or _DEFAULT_TRANSFORM, seed & MASK64)
    except ValueError as error:
        raise ImageDecodeError(f"image {name or 'image'!r}: {error}") from None


@dataclass(frozen=True)
class ImageSizes:
    """Images' upright sizes read from their headers.

    Attributes:
        widths: int64 widths in pixels (0 where the header could not be read).
        heights: int64 heights, aligned.
        errors: Per image None, or why its header could not be read.
    """

    widths: np.ndarray
    heights: np.ndarray
    errors: list[str | None]


def image_sizes(images: Sequence[Any], *, max_pixels: int | None = None, names: Sequence[str] | None = None) -> ImageSizes:
    """Each image's upright size from its header alone, pixels left undecoded (the native core,
    without the GIL): what batching by aspect ratio (`stoker.sampling.Buckets`) needs of every
    sample, for a fraction of a decode's cost. Each image is read on its own: nothing of one
    (nor of an earlier call) stands in for another's header.

    Args:
        images: Encoded JPEG, PNG or WebP images (bytes or any buffer); a JPEG's EXIF
            orientation is applied (a portrait photo stored on its side is tall).
        max_pixels: A header declaring more pixels is an error for that image (default:
            `ImageTransform`'s, Pillow's limit).
        names: How errors name the images (default: the reasons alone, in the images' order).

    Returns:
        `ImageSizes`: widths, heights and a reason for each image whose header is unreadable
        (a truncated header among them: 0 x 0 and its reason, never another image's size).

    Raises:
        ConfigurationError: ``names`` of another length than ``images``.
    """
    if names is not None and len(names) != len(images):
        raise ConfigurationError(f"{len(names)} names for {len(images)} images")
    arguments = {} if max_pixels is None else {"max_pixels": max_pixels}
    widths, heights, errors = _image_sizes([as_bytes(image) for image in images], **arguments)
    if names is not None:
        errors = [None if error is None else f"image {name!r}: {error}" for name, error in zip(names, errors)]
    return ImageSizes(widths, heights, errors)


_DEFAULT_TRANSFORM = ImageTransform()
