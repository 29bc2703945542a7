"""Each bucket's decode (the user's transform with the bucket's shape as its ``cover``, or the
bucket's length as its window or clip) into a pool of that bucket's batch buffers; what buckets
need of the other options; the epoch's report; the buckets as a ledger records them, and the
transform of a recorded batch found again for replay.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ...device import BufferPool, pinned_allocator
from ...errors import ConfigurationError
from ...ops import AudioTransform, ImageTransform, VideoTransform, seconds_to_samples
from ...ops.batch import Transform, allocate_batch
from ...sampling import BucketOrder, Buckets, LengthBuckets, RecutOrder, Sampler
from .._options import Reads, Sampling
from ._sizes import AnyBuckets, assign_payloads

__all__ = ["BucketShapes", "batch_transform", "bucket_report", "buckets_from_description", "check_buckets", "describe_buckets"]

_VIDEO_GEOMETRY = ("random_crop",)
"""A VideoTransform's geometry beyond the names an ImageTransform shares (`_GEOMETRY`)."""

_GEOMETRY = ("resize_shorter", "resize", "center_crop", "random_resized_crop", "scale", "ratio", "cover", "cover_crop")


def _bucket_transform(transform: Transform, buckets: AnyBuckets, number: int) -> Transform:
    """The user's transform with bucket ``number``'s geometry or length."""
    _, options = transform.__getnewargs_ex__()
    if isinstance(buckets, Buckets):
        common = {name: value for name, value in options.items() if name not in _GEOMETRY + _VIDEO_GEOMETRY}
        kind = VideoTransform if isinstance(transform, VideoTransform) else ImageTransform
        return kind(**common, cover=buckets.shapes[number], cover_crop=buckets.crop)
    length = buckets.lengths[number]
    if isinstance(transform, AudioTransform):
        return AudioTransform(**{**options, "samples": seconds_to_samples(length, options["sample_rate"])})
    return VideoTransform(**{**options, "frames": int(length)})


class BucketShapes:
    """Each bucket's transform and buffer pool, chosen by a batch's first sample.

    Args:
        buckets: The shapes or lengths.
        transform: The user's transform, giving everything but the geometry or length (dtype,
            layout, normalization, flip, rate, channels); each bucket's shape becomes its
            ``cover``, each bucket's length its window's ``samples`` or its clip's ``frames``.
        bucket_of: Each sample's bucket.
        batch_size: Samples per batch.
        capacity: Buffers kept per bucket's pool.
        pin_memory: Page-locked buffers where CUDA is there.

    `check_buckets` has refused, before this is built, a transform buckets cannot work with.
    """

    def __init__(
        self, buckets: AnyBuckets, transform: Transform, bucket_of: np.ndarray, *, batch_size: int, capacity: int, pin_memory: bool
    ) -> None:
        self.buckets = buckets
        self.bucket_of = bucket_of
        self.transforms = [_bucket_transform(transform, buckets, number) for number in range(len(buckets))]
        # Each bucket's pool, made by the first decode thread that needs it: `_pools_lock` makes
        # the look-up and the making one step, so a bucket never gets two pools.
        self._pools_lock = threading.Lock()
        self._pools: dict[int, BufferPool] = {}
        self._batch_size, self._pin_memory = batch_size, pin_memory
        self.capacity = capacity

    def for_batch(self, indices: np.ndarray) -> tuple[Transform, BufferPool]:
        """The transform and pool of the bucket of a batch (its samples share one)."""
        number = int(self.bucket_of[int(indices[0])])
        with self._pools_lock:
            pool = self._pools.get(number)
            if pool is None:
                transform = self.transforms[number]
                allocate: Callable[[], np.ndarray] = lambda: allocate_batch(transform, self._batch_size)  # noqa: E731
                if self._pin_memory:
                    shape = allocate_batch(transform, 1).shape[1:]
                    allocate = pinned_allocator((self._batch_size, *shape), transform.dtype)
                pool = self._pools[number] = BufferPool(allocate, capacity=self.capacity)
        pool.capacity = self.capacity
        return self.transforms[number], pool


def check_buckets(buckets: AnyBuckets, transform: Transform | None, sampling: Sampling, reads: Reads) -> None:
    """What buckets need of the other options, said before anything is read."""
    if not isinstance(buckets, (Buckets, LengthBuckets)):
        raise TypeError(f"buckets must be a stoker.sampling.Buckets or LengthBuckets, got {type(buckets).__name__}")
    if isinstance(buckets, Buckets):
        if not isinstance(transform, (ImageTransform, VideoTransform)):
            raise ConfigurationError(
                "Buckets batch images (or videos) by shape: give an ImageTransform or VideoTransform (without resize or crop) as transform"
            )
        _, options = transform.__getnewargs_ex__()
        # A VideoTransform cannot be built without a frame size: its resize and crop are
        # replaced by each bucket's cover. An ImageTransform with one was asked for something
        # else than buckets, and is told so.
        geometry = ("resize_shorter", "resize", "center_crop", "random_resized_crop", "cover")
        fixed = [name for name in geometry if options.get(name) is not None and isinstance(transform, ImageTransform)]
        if fixed:
            raise ConfigurationError(
                f"with buckets, each bucket's shape is the transform's geometry: drop {', '.join(fixed)} from the transform "
                "(Buckets(crop=...) says where the crop goes)"
            )
    elif not isinstance(transform, (AudioTransform, VideoTransform)):
        raise ConfigurationError("LengthBuckets batch audio or video by length: give an AudioTransform or VideoTransform as transform")
    elif isinstance(transform, VideoTransform):
        if buckets.shorter == "pad":
            raise ConfigurationError('a video clip cannot be padded: LengthBuckets(shorter="skip") for video')
        if any(length != int(length) for length in buckets.lengths):
            raise ConfigurationError(f"a video bucket's length is a clip's frame count, a whole number: got {buckets.lengths}")
    if sampling.shuffle != "uniform":
        raise ConfigurationError(f"buckets shuffle within each bucket and across batches: use shuffle='uniform', not {sampling.shuffle!r}")
    if reads.sample_prefetch:
        raise ConfigurationError(
            "buckets read each batch whole; sample_prefetch fills batches from several and cannot keep them one bucket's"
        )


def bucket_report(sampler: Sampler, buckets: AnyBuckets) -> dict[str, Any]:
    """`Loader.bucket_counts` for the sampler's epoch."""
    order = sampler.order_function()
    cut = order if isinstance(order, RecutOrder) else None  # resumed with another batch size
    order = cut.first if cut is not None else order
    assert isinstance(order, BucketOrder) and sampler.buckets is not None
    bucket_of, _ = sampler.buckets
    dealt = order.bucket_of_batch(np.arange(order.batches, dtype=np.int64))
    shares = np.bincount(dealt, minlength=len(buckets)) / max(1, len(dealt))
    return {
        "shape" if isinstance(buckets, Buckets) else "length": buckets.labels(),
        "samples": order.sizes.tolist(),
        "batches": order.batches,
        "left_over": order.leftovers().tolist(),
        "leftovers": order.policy,
        "without_bucket": int((bucket_of < 0).sum()),
        "same_bucket_next": float(np.mean(dealt[1:] == dealt[:-1])) if len(dealt) > 1 else float("nan"),
        "same_bucket_expected": float((shares**2).sum()),
        **(
            {"cut": {"batch_size_before": cut.batch_size_before, "batches": cut.batches, "left_over": cut.left_over}}
            if cut is not None
            else {}
        ),
    }


def describe_buckets(buckets: AnyBuckets) -> dict[str, Any]:
    """The buckets as the ledger records them: enough to build them again for replay."""
    if isinstance(buckets, Buckets):
        return {
            "type": "Buckets",
            "shapes": buckets.labels(),
            "crop": buckets.crop,
            "columns": buckets.columns,
            "leftovers": buckets.leftovers,
        }
    return {
        "type": "LengthBuckets",
        "lengths": buckets.labels(),
        "shorter": buckets.shorter,
        "column": buckets.column,
        "leftovers": buckets.leftovers,
    }


def buckets_from_description(described: Any) -> AnyBuckets:
    """`describe_buckets`'s inverse, for a description read from a ledger (untrusted input: the
    constructors check every value).

    Raises:
        ValueError: Not such a description (`ConfigurationError` is one).
    """
    if not isinstance(described, dict):
        raise ValueError(f"not a description of buckets: {described!r:.80}")
    if described.get("type") == "Buckets":
        columns = described.get("columns")
        return Buckets(
            [tuple(shape) for shape in described["shapes"]], crop=described["crop"], columns=None if columns is None else tuple(columns)
        )
    if described.get("type") == "LengthBuckets":
        return LengthBuckets(described["lengths"], shorter=described["shorter"], column=described.get("column"))
    raise ValueError(f"unknown kind of buckets {described.get('type')!r:.40}")


def batch_transform(buckets: AnyBuckets, transform: Transform, payloads: list[Any]) -> tuple[Transform, int]:
    """The transform a bucketed batch was decoded with, found from its samples' own headers (the
    bucket most of them go to; a replacement for a bad sample may come from another), and its
    bucket number.

    Raises:
        ValueError: No sample of the batch has a readable size or length.
    """
    assigned = assign_payloads(buckets, transform, payloads)
    known = assigned[assigned >= 0]
    if not len(known):
        raise ValueError("no sample of the batch has a readable size or length to find its bucket by")
    number = int(np.bincount(known).argmax())
    return _bucket_transform(transform, buckets, number), number
