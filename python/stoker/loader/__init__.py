"""The one-line path: storage + sampling + ops on the engine, with exact resume."""

from ._batch import Batch
from ._buffers import BufferPool
from ._loader import Loader

__all__ = ["Batch", "BufferPool", "Loader"]
