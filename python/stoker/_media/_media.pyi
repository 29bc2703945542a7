"""Type stubs for each build of the media part, `stoker._media.ffmpegN._media` (Rust, one build
per FFmpeg major). Load it through `stoker.ops._media_backend.media_backend`, which loads the
FFmpeg libraries it needs first."""

from collections.abc import Sequence
from typing import TypedDict

import numpy as np

__all__ = ["__version__", "decode_audio_batch_into", "decode_video_batch_into", "ffmpeg_versions", "probe_media_into"]

__version__: str

def decode_audio_batch_into(
    inputs: Sequence[bytes | bytearray],
    out: np.ndarray,
    seeds: Sequence[int],
    compact: bool = False,
    threads: int = 1,
    *,
    sample_rate: int,
    samples: int,
    channels: int = 1,
    select_channel: int | None = None,
    window: str,
    dtype: str,
) -> list[str | None]:
    """Decode audio windows into out[i] (GIL released); one error message or None per input.
    The keywords are an `AudioTransform`'s (``transform.__getnewargs_ex__()[1]``)."""

def decode_video_batch_into(
    inputs: Sequence[bytes | bytearray],
    out: np.ndarray,
    seeds: Sequence[int],
    compact: bool = False,
    threads: int = 1,
    *,
    frames: int,
    stride: int = 1,
    fps: float | None = None,
    clip: str,
    resize_shorter: int | None = None,
    resize: tuple[int, int] | None = None,
    center_crop: tuple[int, int] | None = None,
    random_crop: tuple[int, int] | None = None,
    cover: tuple[int, int] | None = None,
    cover_crop: str = "center",
    flip_probability: float,
    layout: str,
) -> list[str | None]:
    """Decode video clips into out[i] (GIL released); one error message or None per input.
    The keywords are a `VideoTransform`'s (``transform.__getnewargs_ex__()[1]``)."""

def probe_media_into(inputs: Sequence[bytes | bytearray], out: np.ndarray, kind: str, threads: int = 1) -> list[str | None]:
    """Each file's duration (s), frame count, frame or sample rate, width and height into out[i]
    (float64, shape (N, 5)), from its headers, nothing decoded (GIL released); one error message
    or None per input, its row left zero."""

class _FFmpegVersions(TypedDict):
    built_major: int
    running: str

def ffmpeg_versions() -> _FFmpegVersions:
    """The libavcodec major this build was made for and the version it runs with."""
