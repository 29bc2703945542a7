"""The one-line path: storage + sampling + ops on the engine, with exact resume."""

from ._batch import Batch
from ._buffers import BufferPool, pinned_allocator
from ._failures import BadSample, SampleError, TooManyBadSamplesError
from ._loader import Loader
from ._tokens import TokenLoader

__all__ = ["BadSample", "Batch", "BufferPool", "Loader", "SampleError", "TokenLoader", "TooManyBadSamplesError", "pinned_allocator"]
