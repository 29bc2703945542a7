"""torch.distributed integration: rank discovery for the Loader (`discover_world`), the loader's
state in a DCP checkpoint with every rank's state (`LoaderCheckpoint`), for elastic restarts with
another number of ranks, and an agreed last step for loaders whose ranks can yield different
numbers of batches (`StepAgreement`). torch is imported only where a process group is in use."""

from ._agreement import StepAgreement
from ._checkpoint import MAX_STATE_FILE_BYTES, LoaderCheckpoint, read_state_file
from ._ranks import World, discover_world, process_group

__all__ = ["MAX_STATE_FILE_BYTES", "LoaderCheckpoint", "read_state_file", "StepAgreement", "World", "discover_world", "process_group"]
