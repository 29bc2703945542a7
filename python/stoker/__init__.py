"""stoker: keeps accelerators fed.

A data loading library with a Rust core: a pipeline engine whose stages each have their own
concurrency and bounded queues, run by one scheduler thread and a pool of threads that work
without the GIL.
"""

from . import ops, pipeline, storage
from ._native import __version__
from .pipeline import Pipeline, PipelineBuilder

__all__ = ["Pipeline", "PipelineBuilder", "__version__", "ops", "pipeline", "storage"]
