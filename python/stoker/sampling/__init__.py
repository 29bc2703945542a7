"""Order: deterministic shuffles per epoch (uniform, by storage blocks, or by buckets of shape or length), rank sharding with equal counts, exact resume, and
out-of-order incremental prefetch for high-latency storage, and seeded train/val/test splits and
k-fold folds."""

from ._block_lookahead import BlockLookahead
from ._block_order import BlockOrder, block_order, shuffle_quality
from ._bucket_order import BucketOrder
from ._buckets import MAX_BUCKETS, Buckets
from ._epoch_plan import EpochPlan
from ._epoch_warmup import EpochWarmup
from ._length_buckets import LengthBuckets
from ._permutation import IndexPermutation
from ._plan import BatchPlan, PlannedSample, PlanRequests
from ._prefetch import FetchedSample, OutOfOrderPrefetcher
from ._ranges import PositionSet
from ._sampler import SamplePlan, Sampler
from ._split import SPLITS_FORMAT, k_folds, read_split, split_samples, write_splits
from ._whole_batch_plan import RecutOrder, WholeBatchPlan

__all__ = [
    "BatchPlan",
    "BlockLookahead",
    "BlockOrder",
    "BucketOrder",
    "Buckets",
    "MAX_BUCKETS",
    "EpochPlan",
    "EpochWarmup",
    "IndexPermutation",
    "LengthBuckets",
    "SPLITS_FORMAT",
    "FetchedSample",
    "OutOfOrderPrefetcher",
    "PlanRequests",
    "PlannedSample",
    "PositionSet",
    "RecutOrder",
    "SamplePlan",
    "Sampler",
    "WholeBatchPlan",
    "block_order",
    "k_folds",
    "read_split",
    "shuffle_quality",
    "split_samples",
    "write_splits",
]
