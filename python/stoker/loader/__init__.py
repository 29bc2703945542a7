"""The one-line path: storage + sampling + ops on the engine, with exact resume."""

from .._deprecation import moved_names
from ._batch import Batch
from ._loader import Loader
from ._options import SHUFFLES, FailurePolicy, Reads, Sampling, Shuffle, Throughput
from ._replay import replay
from .filters import Where
from .text import TokenLoader

__all__ = [
    "Batch",
    "FailurePolicy",
    "Loader",
    "Reads",
    "SHUFFLES",
    "Sampling",
    "Shuffle",
    "Throughput",
    "TokenLoader",
    "Where",
    "replay",
]

__getattr__ = moved_names(
    __name__,
    {
        "BadSample": "stoker.failures:Failure",
        # The batch buffers are the device package's (page-locked memory is a device matter).
        "BufferPool": "stoker.device:BufferPool",
        "pinned_allocator": "stoker.device:pinned_allocator",
        "SampleError": "stoker.errors:SampleError",
        "TooManyBadSamplesError": "stoker.errors:TooManyBadSamplesError",
    },
)
