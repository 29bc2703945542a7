"""Samples of any kind decoded into one batch buffer: the path images, audio windows and video
clips share. Each transform (`ImageTransform`, `AudioTransform`, `VideoTransform`) has its native
batch decoder; `decode_batch` picks it, hands it the buffer and the per-sample seeds, and turns
the failed slots into `stoker.failures.Failure` records under ``on_error``.

Results are numpy arrays: ``torch.from_numpy(array)`` and ``jax.dlpack.from_dlpack(array)``
share their memory without a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._native import AudioTransform, ImageTransform, VideoTransform, decode_batch_into
from ..errors import BatchDecodeError, ConfigurationError, check_on_error
from ..failures import Failure, OnError
from ._media_backend import decode_audio_batch_into, decode_video_batch_into

__all__ = ["TRANSFORMS", "DecodedBatch", "Transform", "allocate_batch", "as_bytes", "decode_batch", "sample_seeds", "transform_description"]

# Any transform that decodes samples into one batch buffer: images, audio windows, video clips.
Transform = ImageTransform | AudioTransform | VideoTransform
TRANSFORMS = (ImageTransform, AudioTransform, VideoTransform)
_BATCH_DECODERS: dict[type, Any] = {
    ImageTransform: decode_batch_into,
    AudioTransform: decode_audio_batch_into,
    VideoTransform: decode_video_batch_into,
}
_SEED_MIX = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1


@dataclass
class DecodedBatch:
    """The result of `decode_batch`.

    Attributes:
        images: The batch. With ``on_error="skip"`` only the successful samples, in input order;
            otherwise one slot per input, failed ones zero-filled.
        valid: One flag per input: whether it decoded.
        failures: The inputs that failed (`stoker.failures.Failure`, stage ``"decode"``,
            position the input's index).
    """

    images: np.ndarray
    valid: np.ndarray
    failures: list[Failure]


def as_bytes(data: Any) -> bytes | bytearray:
    """``data`` as bytes: bytes as they are, any other buffer copied once."""
    if isinstance(data, (bytes, bytearray)):
        return data
    try:
        return bytes(memoryview(data))  # numpy arrays, memoryviews, mmap slices: one copy
    except TypeError:
        raise TypeError(f"expected bytes or a buffer, got {type(data).__name__}") from None


def sample_seeds(seed: int, count: int) -> list[int]:
    """Per-sample seeds derived from one seed: sample i of a batch gets its own stream."""
    return [((seed & MASK64) * _SEED_MIX + index) & MASK64 for index in range(count)]


def allocate_batch(transform: Transform, batch_size: int) -> np.ndarray:
    """A zeroed array shaped for ``batch_size`` outputs of ``transform``.

    Raises:
        ValueError: The transform's output size depends on the image (no crop or exact resize).
    """
    if not isinstance(transform, ImageTransform):
        return np.zeros((batch_size, *transform.output_shape), dtype=transform.dtype)
    size = transform.output_size
    if size is None:
        raise ConfigurationError("the transform has no fixed output size: add a crop or an exact resize")
    height, width = size
    channels = transform.channels
    shape = (batch_size, height, width, channels) if transform.layout == "HWC" else (batch_size, channels, height, width)
    return np.zeros(shape, dtype=transform.dtype)


def _writable_array(out: Any) -> np.ndarray:
    if isinstance(out, np.ndarray):
        return out
    numpy_view = getattr(out, "numpy", None)  # torch tensors (pinned or not) share memory this way
    if callable(numpy_view):
        if getattr(out, "device", None) is not None and str(out.device) != "cpu":
            raise ConfigurationError(f"out must be in host memory, it is on {out.device}")
        return numpy_view()
    raise TypeError(f"out must be a numpy array or a CPU torch tensor, got {type(out).__name__}")


def decode_batch(
    items: Sequence[Any],
    transform: Transform,
    *,
    out: Any = None,
    seed: int = 0,
    seeds: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
    on_error: OnError = "raise",
    threads: int = 1,
) -> DecodedBatch:
    """Decode ``items`` into one contiguous batch.

    Args:
        items: Encoded images, or audio or video files (with an `AudioTransform` or a
            `VideoTransform`).
        transform: Must give every sample the same shape (for images: a crop or an exact resize).
        out: Where to write, shape ``(N, ...)`` with ``N >= len(items)``; default: a new array.
        seed: Seeds per-sample randomness when ``seeds`` is not given (see `sample_seeds`).
        seeds: One seed per item, e.g. derived from the sample's key and the epoch, so an
            image's augmentation does not depend on which batch it landed in.
        names: How errors name the items (default: their positions).
        on_error: ``"raise"`` raises `BatchDecodeError` listing every failure after the whole
            batch is decoded; ``"skip"`` compacts the successes to the front; ``"zero"``
            leaves failed slots zero-filled and marks them in ``valid``.
        threads: Threads this call may use (default 1: the pipeline decides concurrency).

    Raises:
        BatchDecodeError: Samples failed and ``on_error="raise"``.
        ValueError: Wrong ``out`` (shape, contiguity, not writable), seeds or names length.
        TypeError: ``out`` of the wrong dtype or type.
    """
    check_on_error(on_error)
    count = len(items)
    if names is not None and len(names) != count:
        raise ConfigurationError(f"{len(names)} names for {count} items")
    array = allocate_batch(transform, count) if out is None else _writable_array(out)
    if not array.flags.writeable:
        raise ConfigurationError("out is read-only")
    seed_list = list(seeds) if seeds is not None else sample_seeds(seed, count)
    errors = _BATCH_DECODERS[type(transform)](
        [as_bytes(item) for item in items],
        transform,
        array,
        [value & MASK64 for value in seed_list],
        compact=on_error == "skip",
        threads=threads,
    )
    action = {"raise": "raised", "skip": "skipped", "zero": "zero-filled"}[on_error]
    failures = [
        Failure(str(names[index]) if names is not None else str(index), "decode", message, action, position=index)
        for index, message in enumerate(errors)
        if message is not None
    ]
    valid = np.array([message is None for message in errors], dtype=bool)
    images = array[: count - len(failures)] if on_error == "skip" else array[:count]
    batch = DecodedBatch(images=images, valid=valid, failures=failures)
    if failures and on_error == "raise":
        raise BatchDecodeError(failures, batch)
    return batch


def transform_description(transform: Any) -> dict[str, Any] | None:
    """A transform as plain data (its type and constructor keywords), to build it again."""
    if transform is None:
        return None
    _, keywords = transform.__getnewargs_ex__()
    return {"type": type(transform).__name__, "arguments": {name: _plain(value) for name, value in keywords.items()}}


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value
