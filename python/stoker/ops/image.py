"""Image decode and transform, in the native core without the GIL.

One call decodes JPEG, PNG or WebP bytes, turns them upright (EXIF), crops and resizes them with
an antialiasing filter, flips, normalizes, and writes each image once, into its slot of a batch
buffer that may be yours (`stoker.ops.decode_batch`; a numpy array, or a page-locked torch tensor
through ``.numpy()``). The GIL is released for the whole call, so a pipeline stage running it in
threads scales with the cores.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._native import ImageTransform
from .._native import decode_image as _decode_image
from ..errors import ImageDecodeError
from .batch import MASK64, as_bytes

__all__ = ["ImageTransform", "decode_image"]


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


_DEFAULT_TRANSFORM = ImageTransform()
