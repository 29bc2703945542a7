"""What happens to bytes: image decode and transform into batch memory, token sequence packing
(both in the native core, GIL-free)."""

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
from .packing import EfficiencyReport, PackedBatch, SequencePacker, as_token_array

__all__ = [
    "BatchDecodeError",
    "DecodedBatch",
    "EfficiencyReport",
    "ImageDecodeError",
    "ImageTransform",
    "PackedBatch",
    "SampleFailure",
    "SequencePacker",
    "allocate_batch",
    "as_token_array",
    "decode_batch",
    "decode_image",
    "sample_seeds",
]
