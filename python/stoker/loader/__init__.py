"""The one-line path: storage + sampling + ops on the engine, with exact resume."""

from .._deprecation import moved_names
from ._batch import Batch
from ._buffers import BufferPool, pinned_allocator
from ._loader import Loader
from ._options import FailurePolicy, Reads, Sampling, Throughput
from ._tokens import TokenLoader

__all__ = ["Batch", "BufferPool", "FailurePolicy", "Loader", "Reads", "Sampling", "Throughput", "TokenLoader", "pinned_allocator"]

__getattr__ = moved_names(
    __name__,
    {
        "BadSample": "stoker.failures:Failure",
        "SampleError": "stoker.errors:SampleError",
        "TooManyBadSamplesError": "stoker.errors:TooManyBadSamplesError",
    },
)
