"""Image decode and transform into batch memory, in the native core without the GIL.

One call decodes JPEG or PNG bytes, turns them upright (EXIF), crops and resizes them with an
antialiasing filter, flips, normalizes, and writes each image once, into its slot of a batch
buffer that may be yours (a numpy array, or a page-locked torch tensor through ``.numpy()``).
The GIL is released for the whole call, so a pipeline stage running it in threads scales with
the cores.

Results are numpy arrays: ``torch.from_numpy(array)`` and ``jax.dlpack.from_dlpack(array)``
share their memory without a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .._native import AudioTransform, ImageTransform, VideoTransform, decode_batch_into
from .._native import decode_image as _decode_image
from ._media_backend import decode_audio_batch_into, decode_video_batch_into

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

OnError = Literal["raise", "skip", "zero"]
# Any transform that decodes samples into one batch buffer: images, audio windows, video clips.
Transform = ImageTransform | AudioTransform | VideoTransform
TRANSFORMS = (ImageTransform, AudioTransform, VideoTransform)
_BATCH_DECODERS: dict[type, Any] = {
    ImageTransform: decode_batch_into,
    AudioTransform: decode_audio_batch_into,
    VideoTransform: decode_video_batch_into,
}
_SEED_MIX = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


class ImageDecodeError(ValueError):
    """One image (or audio or video sample) could not be decoded or transformed; the message names it."""


@dataclass(frozen=True)
class SampleFailure:
    """A sample of a batch that failed: its position, its name and why."""

    index: int
    name: str
    message: str

    def describe(self) -> str:
        return f"sample {self.name!r} (#{self.index}): {self.message}"


class BatchDecodeError(ValueError):
    """Samples of a batch failed under ``on_error="raise"``; ``.failures`` lists them all.

    ``.batch`` holds the batch as decoded, failed slots zero-filled, for callers that want to
    log and go on.
    """

    def __init__(self, failures: list[SampleFailure], batch: DecodedBatch) -> None:
        self.failures = failures
        self.batch = batch
        listed = "\n".join(f"  - {failure.describe()}" for failure in failures[:10])
        more = f"\n  ... and {len(failures) - 10} more" if len(failures) > 10 else ""
        super().__init__(f"{len(failures)} of {len(batch.valid)} samples failed:\n{listed}{more}")


@dataclass
class DecodedBatch:
    """The result of `decode_batch`.

    Attributes:
        images: The batch. With ``on_error="skip"`` only the successful samples, in input order;
            otherwise one slot per input, failed ones zero-filled.
        valid: One flag per input: whether it decoded.
        failures: The inputs that failed.
    """

    images: np.ndarray
    valid: np.ndarray
    failures: list[SampleFailure]


def _as_bytes(data: Any) -> bytes | bytearray:
    if isinstance(data, (bytes, bytearray)):
        return data
    try:
        return bytes(memoryview(data))  # numpy arrays, memoryviews, mmap slices: one copy
    except TypeError:
        raise TypeError(f"expected bytes or a buffer, got {type(data).__name__}") from None


def sample_seeds(seed: int, count: int) -> list[int]:
    """Per-sample seeds derived from one seed: sample i of a batch gets its own stream."""
    return [((seed & _MASK64) * _SEED_MIX + index) & _MASK64 for index in range(count)]


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
        return _decode_image(_as_bytes(data), transform or _DEFAULT_TRANSFORM, seed & _MASK64)
    except ValueError as error:
        raise ImageDecodeError(f"image {name or 'image'!r}: {error}") from None


def allocate_batch(transform: Transform, batch_size: int) -> np.ndarray:
    """A zeroed array shaped for ``batch_size`` outputs of ``transform``.

    Raises:
        ValueError: The transform's output size depends on the image (no crop or exact resize).
    """
    if not isinstance(transform, ImageTransform):
        return np.zeros((batch_size, *transform.output_shape), dtype=transform.dtype)
    size = transform.output_size
    if size is None:
        raise ValueError("the transform has no fixed output size: add a crop or an exact resize")
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
            raise ValueError(f"out must be in host memory, it is on {out.device}")
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
    if on_error not in ("raise", "skip", "zero"):
        raise ValueError(f'on_error must be "raise", "skip" or "zero", got {on_error!r}')
    count = len(items)
    if names is not None and len(names) != count:
        raise ValueError(f"{len(names)} names for {count} items")
    array = allocate_batch(transform, count) if out is None else _writable_array(out)
    if not array.flags.writeable:
        raise ValueError("out is read-only")
    seed_list = list(seeds) if seeds is not None else sample_seeds(seed, count)
    errors = _BATCH_DECODERS[type(transform)](
        [_as_bytes(item) for item in items],
        transform,
        array,
        [value & _MASK64 for value in seed_list],
        compact=on_error == "skip",
        threads=threads,
    )
    failures = [
        SampleFailure(index, str(names[index]) if names is not None else str(index), message)
        for index, message in enumerate(errors)
        if message is not None
    ]
    valid = np.array([message is None for message in errors], dtype=bool)
    images = array[: count - len(failures)] if on_error == "skip" else array[:count]
    batch = DecodedBatch(images=images, valid=valid, failures=failures)
    if failures and on_error == "raise":
        raise BatchDecodeError(failures, batch)
    return batch


_DEFAULT_TRANSFORM = ImageTransform()
