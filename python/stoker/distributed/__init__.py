"""torch.distributed integration: rank discovery for the Loader (`discover_world`) and the
loader's state in a DCP checkpoint with every rank's state (`LoaderCheckpoint`), for elastic
restarts with another number of ranks. torch is optional: nothing here imports it."""

from ._checkpoint import LoaderCheckpoint
from ._ranks import World, discover_world, process_group

__all__ = ["LoaderCheckpoint", "World", "discover_world", "process_group"]
