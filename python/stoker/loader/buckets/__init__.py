"""A Loader's buckets (``Sampling(buckets=Buckets(...))`` for images and video by shape,
``LengthBuckets(...)`` for audio and video by length): which bucket each sample goes to
(`_sizes`), and each bucket's decode, report and record (`_shapes`)."""

from ._shapes import BucketShapes, batch_transform, bucket_report, buckets_from_description, check_buckets, describe_buckets
from ._sizes import AnyBuckets, bucket_numbers, clip_capacities

__all__ = [
    "AnyBuckets",
    "BucketShapes",
    "batch_transform",
    "bucket_numbers",
    "bucket_report",
    "buckets_from_description",
    "check_buckets",
    "clip_capacities",
    "describe_buckets",
]
