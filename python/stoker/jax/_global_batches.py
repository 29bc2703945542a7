"""Each process's batches assembled into one global, sharded `jax.Array` per step: the way a
multi-host JAX job feeds a jitted step over a device mesh."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..loader import Batch, Loader

__all__ = ["GlobalBatch", "global_batches"]


@dataclass
class GlobalBatch:
    """One step's batch over every process: ``data`` and ``labels`` are global `jax.Array`\\ s
    (this process holds its rows, on its devices), ``local`` is this process's `stoker.Batch`
    (keys, validity, padding, positions)."""

    data: Any
    labels: Any
    local: Batch


def global_batches(loader: Loader, sharding: Any) -> Iterator[GlobalBatch]:
    """This process's Loader, each batch placed as its rows of a global array over ``sharding``.

    The Loader must be made with ``Sampling(rank=jax.process_index(),
    world_size=jax.process_count())`` (every process then delivers the same number of batches,
    as the global array needs), and a transform (its batches are one array each). The global
    batch is ``batch_size x process_count`` rows along the sharding's first mesh axis, built by
    `jax.make_array_from_process_local_data` without gathering anything across hosts.

    Args:
        loader: This process's Loader.
        sharding: A `jax.sharding.Sharding` of the global batch, e.g.
            ``NamedSharding(mesh, PartitionSpec("data"))``.

    Raises:
        ValueError: The Loader's rank or world size are not this JAX process's.
        TypeError: A batch whose data is a list (a ``decode`` function) rather than one array.
    """
    import jax

    rank, world_size = loader.sampler.rank, loader.sampler.world_size
    if (rank, world_size) != (jax.process_index(), jax.process_count()):
        raise ValueError(
            f"the Loader is rank {rank} of {world_size}, this is JAX process {jax.process_index()} of {jax.process_count()}: "
            "make it with Sampling(rank=jax.process_index(), world_size=jax.process_count())"
        )
    for batch in loader:
        if not isinstance(batch.data, np.ndarray):
            raise TypeError(
                f"batch {batch.index} holds a {type(batch.data).__name__}, not one array: a global jax.Array needs a Loader "
                "with a transform (or stack the samples yourself)"
            )
        data = jax.make_array_from_process_local_data(sharding, batch.data)
        labels = jax.make_array_from_process_local_data(sharding, batch.labels)
        yield GlobalBatch(data, labels, batch)
