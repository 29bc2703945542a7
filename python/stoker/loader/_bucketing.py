"""A Loader's buckets (``Loader(..., buckets=Buckets(...))``): every sample's size read from its
header once, its bucket, and each bucket's decode (the user's transform with the bucket's shape
as its ``cover``) into a pool of that shape's batch buffers.

Sizes are read from the payloads' headers (`stoker.ops.image_sizes`: no pixel is decoded), a
batch of samples at a time, and saved in ``$STOKER_CACHE/image-sizes`` under the storage's
content digest where it has one, so a later run, and the node's other ranks, read no payload to
bucket the dataset. A sample whose header cannot be read goes to no bucket: it is never read by a
bucketed epoch, and the log names how many and the first of them.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from ..device import BufferPool, pinned_allocator
from ..errors import ConfigurationError
from ..ops import ImageTransform, image_sizes
from ..ops.batch import Transform, allocate_batch
from ..sampling import BucketOrder, Buckets, Sampler
from ..storage import Storage, cache_dir
from ._options import Reads, Sampling

__all__ = ["BucketShapes", "bucket_numbers", "bucket_report", "check_buckets"]

_logger = logging.getLogger("stoker.loader")

_SCAN_BATCH = 256
"""Payloads read at once to size them (one `try_read_indices`: coalesced on shards and LMDB)."""

_GEOMETRY = ("resize_shorter", "resize", "center_crop", "random_resized_crop", "scale", "ratio", "cover", "cover_crop")


def _sizes(storage: Storage) -> tuple[np.ndarray, np.ndarray]:
    """Every sample's (width, height) from its header; 0 where unreadable."""
    count = len(storage)
    widths = np.zeros(count, dtype=np.int64)
    heights = np.zeros(count, dtype=np.int64)
    unreadable: list[str] = []
    for start in range(0, count, _SCAN_BATCH):
        indices = list(range(start, min(count, start + _SCAN_BATCH)))
        payloads = storage.try_read_indices(indices)
        readable = [slot for slot, payload in enumerate(payloads) if not isinstance(payload, Exception)]
        sizes = image_sizes([payloads[slot] for slot in readable])
        chosen = np.array(indices, dtype=np.int64)[readable]
        widths[chosen], heights[chosen] = sizes.widths, sizes.heights
        unreadable.extend(str(storage.keys[index]) for index in indices if widths[index] == 0)
    if unreadable:
        _logger.warning(
            "%s: %d sample(s) whose size cannot be read from the header go to no bucket and are not read (first: %s)",
            storage.describe(),
            len(unreadable),
            ", ".join(unreadable[:3]),
        )
    return widths, heights


def bucket_numbers(storage: Storage, buckets: Buckets) -> np.ndarray:
    """Each sample's bucket (-1: none) from its size, read once and saved where the storage has a
    content digest."""
    digest = getattr(storage, "content_digest", None)
    saved = None
    if callable(digest):
        key = hashlib.sha256(f"{digest()}".encode()).hexdigest()[:32]
        saved = cache_dir("image-sizes") / (key + ".npy")
        try:
            loaded = np.load(saved, allow_pickle=False)  # untrusted input: plain numbers only
            if loaded.shape == (2, len(storage)) and loaded.dtype == np.int64:
                return buckets.assign(loaded[0], loaded[1])
        except (OSError, ValueError):
            pass
    widths, heights = _sizes(storage)
    if saved is not None:
        np.save(saved, np.stack([widths, heights]))
    return buckets.assign(widths, heights)


class BucketShapes:
    """Each bucket's transform and buffer pool, chosen by a batch's first sample.

    Args:
        buckets: The shapes.
        transform: The user's transform, giving everything but the geometry (dtype, layout,
            normalization, flip); each bucket's shape becomes its ``cover``.
        bucket_of: Each sample's bucket.
        batch_size: Samples per batch.
        capacity: Buffers kept per bucket's pool.
        pin_memory: Page-locked buffers where CUDA is there.

    Raises:
        ConfigurationError: A transform that sets its own resize or crop.
    """

    def __init__(
        self, buckets: Buckets, transform: ImageTransform, bucket_of: np.ndarray, *, batch_size: int, capacity: int, pin_memory: bool
    ) -> None:
        _, options = transform.__getnewargs_ex__()
        fixed = [
            name for name in ("resize_shorter", "resize", "center_crop", "random_resized_crop", "cover") if options.get(name) is not None
        ]
        if fixed:
            raise ConfigurationError(
                f"with buckets, each bucket's shape is the transform's geometry: drop {', '.join(fixed)} from the transform "
                "(Buckets(crop=...) says where the crop goes)"
            )
        common = {name: value for name, value in options.items() if name not in _GEOMETRY}
        self.buckets = buckets
        self.bucket_of = bucket_of
        self.transforms = [ImageTransform(**common, cover=shape, cover_crop=buckets.crop) for shape in buckets.shapes]
        self._pools: dict[int, BufferPool] = {}
        self._batch_size, self._pin_memory = batch_size, pin_memory
        self.capacity = capacity

    def for_batch(self, indices: np.ndarray) -> tuple[ImageTransform, BufferPool]:
        """The transform and pool of the bucket of a batch (its samples share one)."""
        number = int(self.bucket_of[int(indices[0])])
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


def check_buckets(buckets: Buckets, transform: Transform | None, sampling: Sampling, reads: Reads) -> None:
    """What buckets need of the other options, said before anything is read."""
    if not isinstance(buckets, Buckets):
        raise TypeError(f"buckets must be a stoker.sampling.Buckets, got {type(buckets).__name__}")
    if not isinstance(transform, ImageTransform):
        raise ConfigurationError("buckets batch images by shape: give an ImageTransform (without resize or crop) as transform")
    if sampling.shuffle != "uniform":
        raise ConfigurationError(f"buckets shuffle within each bucket and across batches: use shuffle='uniform', not {sampling.shuffle!r}")
    if reads.sample_prefetch:
        raise ConfigurationError(
            "buckets read each batch whole; sample_prefetch fills batches from several and cannot keep them one bucket's"
        )


def bucket_report(sampler: Sampler, buckets: Buckets) -> dict[str, Any]:
    """`Loader.bucket_counts` for the sampler's epoch."""
    order = sampler.order_function()
    assert isinstance(order, BucketOrder) and sampler.buckets is not None
    bucket_of, _ = sampler.buckets
    dealt = order.bucket_of_batch(np.arange(order.batches, dtype=np.int64))
    shares = np.bincount(dealt, minlength=len(buckets)) / max(1, len(dealt))
    return {
        "shape": [list(shape) for shape in buckets.shapes],
        "samples": order.sizes.tolist(),
        "batches": order.batches,
        "left_over": order.leftovers().tolist(),
        "without_bucket": int((bucket_of < 0).sum()),
        "same_bucket_next": float(np.mean(dealt[1:] == dealt[:-1])) if len(dealt) > 1 else float("nan"),
        "same_bucket_expected": float((shares**2).sum()),
    }
