"""stoker: keeps accelerators fed.

A data loading library with a Rust core: a pipeline engine whose stages each have their own
concurrency and bounded queues, run by one scheduler thread and a pool of threads that work
without the GIL.
"""

from . import device, loader, observe, ops, pipeline, sampling, storage
from ._native import __version__
from .loader import Batch, Loader, TokenLoader
from .observe import DataWaitMeter
from .pipeline import Pipeline, PipelineBuilder

__all__ = [
    "Batch",
    "DataWaitMeter",
    "Loader",
    "Pipeline",
    "PipelineBuilder",
    "TokenLoader",
    "__version__",
    "device",
    "loader",
    "observe",
    "ops",
    "pipeline",
    "sampling",
    "storage",
]
