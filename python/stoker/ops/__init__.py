"""What happens to bytes: image decode and transform into batch memory (native, GIL-free)."""

from .image import (
    BatchDecodeError,
    DecodedBatch,
    ImageDecodeError,
    ImageTransform,
    SampleFailure,
    allocate_batch,
    decode_batch,
    decode_image,
    sample_seeds,
)

__all__ = [
    "BatchDecodeError",
    "DecodedBatch",
    "ImageDecodeError",
    "ImageTransform",
    "SampleFailure",
    "allocate_batch",
    "decode_batch",
    "decode_image",
    "sample_seeds",
]
