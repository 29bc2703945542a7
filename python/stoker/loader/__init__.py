"""The one-line path: storage + sampling + ops on the engine, with exact resume."""

from ._batch import Batch
from ._buffers import BufferPool
from ._loader import Loader
from ._tokens import TokenLoader

__all__ = ["Batch", "BufferPool", "Loader", "TokenLoader"]
