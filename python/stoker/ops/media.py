"""Audio and video decode into batch memory, in the native core without the GIL.

FFmpeg's libraries (the system's ``libav*``, as spdl.io and torchcodec use) demux and decode
each file from memory; only what the sample needs is decoded:

- `AudioTransform`: a window of ``samples`` at ``sample_rate`` Hz (random, seeded per sample, or
  centred, or at the start), resampled with FFmpeg's band-limited filter, down-mixed (or one
  channel kept), cropped or zero-padded, as float32 in [-1, 1] or int16. Decoding starts with a
  seek to just before the window and stops once it is covered.
- `VideoTransform`: a clip of ``frames`` frames at a ``stride`` (or a target ``fps``, or spread
  evenly over the video with ``clip="uniform"``), found by seeking to the keyframe before it;
  frames outside the clip that no other frame refers to are discarded by the decoder unbuilt;
  each clip frame is cropped, converted to RGB and resized in one pass, as uint8.

Both write each sample once, into its slot of a batch buffer; `stoker.Loader` takes them as its
``transform``. A file that cannot give its window or clip (truncated, no such stream, a codec
FFmpeg lacks, a clip longer than the video) is a per-sample error naming the file.

`media_lengths` reads files' durations, frame counts, rates and frame sizes from their headers,
nothing decoded: what batching by length (`stoker.sampling.LengthBuckets`) needs of each sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._native import AudioTransform, VideoTransform
from ..errors import BatchDecodeError, ConfigurationError, MediaDecodeError
from ._media_backend import media_backend
from .batch import as_bytes, decode_batch

__all__ = [
    "AudioTransform",
    "MediaDecodeError",
    "MediaLengths",
    "VideoTransform",
    "decode_audio",
    "decode_video",
    "media_lengths",
    "seconds_to_samples",
]


def seconds_to_samples(seconds: float, sample_rate: int) -> int:
    """The window length in samples for ``seconds`` at ``sample_rate`` (rounded)."""
    if seconds <= 0:
        raise ConfigurationError(f"the window must be positive, got {seconds} s")
    return max(1, round(seconds * sample_rate))


def _decode_one(data: Any, transform: AudioTransform | VideoTransform, seed: int, name: str | None) -> np.ndarray:
    try:
        return decode_batch([data], transform, seeds=[seed], names=[name or "sample"]).images[0]
    except BatchDecodeError as error:
        failure = error.failures[0]
        raise MediaDecodeError(f"{name or 'sample'!r}: {failure.error}") from None


def decode_audio(data: Any, transform: AudioTransform, *, seed: int = 0, name: str | None = None) -> np.ndarray:
    """Decode one audio file's window.

    Args:
        data: The encoded file (WAV, FLAC, MP3, Ogg Vorbis/Opus, AAC in MP4/M4A...).
        transform: Rate, window and channels.
        seed: Places a random window.
        name: How errors name the file.

    Returns:
        ``(channels, samples)`` array of the transform's dtype.

    Raises:
        MediaDecodeError: The file cannot give its window, naming it.
    """
    return _decode_one(data, transform, seed, name)


def decode_video(data: Any, transform: VideoTransform, *, seed: int = 0, name: str | None = None) -> np.ndarray:
    """Decode one video file's clip.

    Args:
        data: The encoded file (MP4, MKV, WebM... with H.264, H.265, VP9, AV1 where FFmpeg
            decodes them).
        transform: Clip sampling, frame geometry and layout.
        seed: Places a random clip.
        name: How errors name the file.

    Returns:
        uint8 array shaped ``transform.output_shape`` (``(frames, 3, height, width)`` for TCHW).

    Raises:
        MediaDecodeError: The file cannot give its clip, naming it.
    """
    return _decode_one(data, transform, seed, name)


@dataclass(frozen=True)
class MediaLengths:
    """Files' lengths as their headers declare them (0 where a file's cannot be read).

    Attributes:
        seconds: float64 durations of the stream probed.
        frames: int64 frame counts (video; 0 for audio).
        rates: float64 frame rates (video) or sample rates (audio).
        widths: int64 frame widths (video; 0 for audio).
        heights: int64 frame heights, aligned.
        errors: Per file None, or why its length cannot be read.
    """

    seconds: np.ndarray
    frames: np.ndarray
    rates: np.ndarray
    widths: np.ndarray
    heights: np.ndarray
    errors: list[str | None]


def media_lengths(files: Sequence[Any], kind: str = "audio", *, threads: int = 1) -> MediaLengths:
    """Each file's length from its container's headers, in the media part without the GIL: the
    demuxer opens the file and reads what the container declares; no frame is decoded.

    Args:
        files: Encoded audio or video files (bytes or any buffer).
        kind: ``"audio"`` (the best audio stream's duration and sample rate) or ``"video"``
            (the best video stream's duration, frame count, frame rate and frame size).
        threads: Files probed at once.

    Returns:
        `MediaLengths`, with a reason for each file whose length is unreadable (not a media
        file, no such stream, no declared length).

    Raises:
        ConfigurationError: Another kind.
        MediaUnavailableError: No supported FFmpeg here.
    """
    if kind not in ("audio", "video"):
        raise ConfigurationError(f'kind must be "audio" or "video", got {kind!r}')
    values = np.zeros((len(files), 5), dtype=np.float64)
    errors = media_backend().probe_media_into([as_bytes(file) for file in files], values, kind, max(1, threads))
    return MediaLengths(
        seconds=values[:, 0].copy(),
        frames=values[:, 1].astype(np.int64),
        rates=values[:, 2].copy(),
        widths=values[:, 3].astype(np.int64),
        heights=values[:, 4].astype(np.int64),
        errors=errors,
    )
