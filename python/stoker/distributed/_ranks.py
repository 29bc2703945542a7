"""Which rank this process is, and how many there are: from an initialized `torch.distributed`
process group, or the variables `torchrun` (and Slurm launchers through it) set, so that a Loader
in a distributed job shards its data without being told."""

from __future__ import annotations

import os
import sys
from typing import Any, NamedTuple

from ..errors import ConfigurationError

__all__ = ["World", "discover_world", "process_group"]


class World(NamedTuple):
    """This process's place in the job."""

    rank: int
    world_size: int
    source: str  # where it was found: "arguments", "process group", "environment" or "single process"


def process_group() -> Any | None:
    """``torch.distributed`` if it is imported and its default process group is initialized;
    None otherwise (torch is never imported here: a job without it pays nothing)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    distributed = getattr(torch, "distributed", None)
    if distributed is None or not distributed.is_available() or not distributed.is_initialized():
        return None
    return distributed


def _environment_integer(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(f"the environment variable {name}={value!r} is not an integer") from None


def discover_world(rank: int | None = None, world_size: int | None = None) -> World:
    """This process's rank and the world size: as given; else from the initialized process
    group; else from ``RANK`` and ``WORLD_SIZE``; else rank 0 of 1.

    Raises:
        ValueError: Only one of ``rank`` and ``world_size`` given; a value that is not an
            integer; a rank outside the world; or given values that disagree with an initialized
            process group (each rank would read another rank's share).
    """
    if (rank is None) != (world_size is None):
        raise ConfigurationError(f"give both rank and world_size or neither (got rank={rank}, world_size={world_size})")
    group = process_group()
    if rank is not None and world_size is not None:
        world = World(rank, world_size, "arguments")
        if group is not None and (group.get_rank(), group.get_world_size()) != (rank, world_size):
            raise ConfigurationError(
                f"rank={rank}, world_size={world_size} disagree with the initialized process group "
                f"(rank {group.get_rank()} of {group.get_world_size()}); leave them out to use the group's"
            )
    elif group is not None:
        world = World(group.get_rank(), group.get_world_size(), "process group")
    else:
        found_rank, found_size = _environment_integer("RANK"), _environment_integer("WORLD_SIZE")
        if (found_rank is None) != (found_size is None):
            raise ConfigurationError(f"RANK and WORLD_SIZE must be set together (RANK={found_rank}, WORLD_SIZE={found_size})")
        world = (
            World(found_rank, found_size, "environment")
            if found_rank is not None and found_size is not None
            else World(0, 1, "single process")
        )
    if world.world_size < 1 or not 0 <= world.rank < world.world_size:
        raise ConfigurationError(f"rank {world.rank} is not within a world of {world.world_size} (from the {world.source})")
    return world
