"""Order: deterministic shuffles per epoch, rank sharding with equal counts, exact resume, and
out-of-order incremental prefetch for high-latency storage."""

from ._prefetch import FetchedSample, OutOfOrderPrefetcher
from ._ranges import PositionSet
from ._sampler import SamplePlan, Sampler

__all__ = ["FetchedSample", "OutOfOrderPrefetcher", "PositionSet", "SamplePlan", "Sampler"]
