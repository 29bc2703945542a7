"""What happens to bytes: image, audio and video decode and transform into batch memory, token
sequence packing (native, GIL-free). Images and packing are the core's; audio and video are the
media part's, which uses the user's FFmpeg and is loaded on first use (`MediaUnavailableError`
when there is none)."""

from ._media_backend import MediaUnavailableError
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
from .media import AudioTransform, MediaDecodeError, VideoTransform, decode_audio, decode_video, seconds_to_samples
from .packing import EfficiencyReport, PackedBatch, SequencePacker, as_token_array

__all__ = [
    "AudioTransform",
    "MediaDecodeError",
    "MediaUnavailableError",
    "VideoTransform",
    "decode_audio",
    "decode_video",
    "seconds_to_samples",
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
