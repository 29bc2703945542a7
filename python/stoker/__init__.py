"""stoker: keeps accelerators fed.

A data loading library with a Rust core: a pipeline engine whose stages each have their own
concurrency and bounded queues, run by one scheduler thread and a pool of threads that work
without the GIL.

``import stoker`` loads nothing but this file and the native core's version: each name below,
and each subpackage, is imported the first time it is used (``stoker.Loader`` loads the loader,
storage, sampling and ops; ``stoker.pipeline`` only the engine).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._native import __version__

if TYPE_CHECKING:
    from . import device, errors, failures, ingest, loader, observe, ops, pipeline, sampling, storage
    from .errors import StokerError
    from .loader import Batch, FailurePolicy, Loader, Reads, Sampling, Throughput, TokenLoader
    from .observe import DataWaitMeter
    from .pipeline import Pipeline, PipelineBuilder

# name -> the module that defines it (a subpackage's name maps to itself).
_LAZY = {
    "Batch": "stoker.loader",
    "DataWaitMeter": "stoker.observe",
    "FailurePolicy": "stoker.loader",
    "Loader": "stoker.loader",
    "Pipeline": "stoker.pipeline",
    "PipelineBuilder": "stoker.pipeline",
    "Reads": "stoker.loader",
    "Sampling": "stoker.loader",
    "StokerError": "stoker.errors",
    "Throughput": "stoker.loader",
    "TokenLoader": "stoker.loader",
    **{
        name: f"stoker.{name}"
        for name in ("device", "errors", "failures", "ingest", "loader", "observe", "ops", "pipeline", "sampling", "storage")
    },
}

__all__ = [
    "Batch",
    "DataWaitMeter",
    "FailurePolicy",
    "Loader",
    "Pipeline",
    "PipelineBuilder",
    "Reads",
    "Sampling",
    "StokerError",
    "Throughput",
    "TokenLoader",
    "__version__",
    "device",
    "errors",
    "failures",
    "ingest",
    "loader",
    "observe",
    "ops",
    "pipeline",
    "sampling",
    "storage",
]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'stoker' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if module_name == f"stoker.{name}" else getattr(module, name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
