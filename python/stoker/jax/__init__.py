"""JAX: each process's batches as one global sharded `jax.Array` (`global_batches`), the
Loader's state in Orbax checkpoints (`LoaderSave`, `LoaderRestore`), and Grain both ways
(`StorageSource`: a stoker storage as a Grain data source; `GrainStorage`: a Grain data source
as a stoker storage). Orbax is imported only when its names are first used."""

from typing import Any

from ._global_batches import GlobalBatch, global_batches
from ._grain import GrainStorage, StorageSource

__all__ = ["GlobalBatch", "GrainStorage", "LoaderCheckpointHandler", "LoaderRestore", "LoaderSave", "StorageSource", "global_batches"]


def __getattr__(name: str) -> Any:
    if name in ("LoaderCheckpointHandler", "LoaderRestore", "LoaderSave"):
        from . import _orbax

        return getattr(_orbax, name)
    raise AttributeError(f"module 'stoker.jax' has no attribute {name!r}")
