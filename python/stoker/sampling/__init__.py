"""Order: deterministic shuffles per epoch, rank sharding with equal counts, exact resume."""

from ._ranges import PositionSet
from ._sampler import SamplePlan, Sampler

__all__ = ["PositionSet", "SamplePlan", "Sampler"]
