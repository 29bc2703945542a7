"""A Loader's place in a `torch.distributed.checkpoint` (DCP) checkpoint, with every rank's state,
so that a job restarted with another number of ranks deals the samples left over the new ranks
(the Loader's elastic resume) without the user gathering anything by hand."""

from __future__ import annotations

import json
from typing import Any, Protocol

from .._bounded import MAX_STATE_BYTES, parse_json
from ..errors import ConfigurationError, JsonError
from ._ranks import process_group

__all__ = ["MAX_STATE_FILE_BYTES", "LoaderCheckpoint", "read_state_file"]

# A Loader's state is a few ranges per rank (kilobytes, however long the epoch): a saved state
# file larger than this is not one, and is refused before it is read.
MAX_STATE_FILE_BYTES = MAX_STATE_BYTES
# A checkpoint's entry holds every rank's state: thousands of ranks of kilobytes each.
_MAX_ENTRY_BYTES = 1 << 30


class _Resumable(Protocol):
    """What `LoaderCheckpoint` needs of a loader (`Loader`, `TokenLoader`)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Any) -> None: ...


class LoaderCheckpoint:
    """A DCP ``Stateful`` for a loader: saving gathers every rank's state into each rank's
    entry (one small JSON text, written once: DCP keeps one copy of an entry every rank holds
    alike); loading hands this rank's loader the list of all of them, so any new world size
    resumes exactly: no sample lost or repeated.

        state = {"model": model_state, "loader": LoaderCheckpoint(loader)}
        torch.distributed.checkpoint.save(state, checkpoint_id=path)
        ...
        torch.distributed.checkpoint.load(state, checkpoint_id=path)  # any world size

    Args:
        loader: The rank's loader; its ``world_size`` is the process group's.

    Raises:
        RuntimeError: (on save or load) The loader is one of several ranks but no process group
            is initialized to gather their states through.
    """

    def __init__(self, loader: _Resumable) -> None:
        self.loader = loader

    def state_dict(self) -> dict[str, Any]:
        """Every rank's loader state, in rank order, as one JSON text (a collective call: DCP
        calls it on every rank, on save and on load)."""
        return {"ranks": json.dumps(self._gather(self.loader.state_dict()))}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from the saved ranks' states: with the world size they were saved at, each rank
        continues its own (the same batches as an uninterrupted run); with another, the samples
        left are dealt over the new ranks.

        Raises:
            ValueError: Not a `LoaderCheckpoint` entry, or states the loader refuses (another
                dataset, seed or shuffle).
        """
        try:
            ranks = state["ranks"]
            if not isinstance(ranks, (str, bytes)):
                raise TypeError(f"its 'ranks' is {type(ranks).__name__}, not JSON text")
            states = parse_json(ranks, "a stoker loader checkpoint entry", max_bytes=_MAX_ENTRY_BYTES)
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigurationError(f"not a stoker loader checkpoint entry ({type(error).__name__}: {error})") from error
        if not isinstance(states, list) or not states:
            raise ConfigurationError("a stoker loader checkpoint entry holds no rank's state")
        own = _own_state(states)
        # The same world: each rank continues its own plan, so the batches after the resume are
        # those an uninterrupted run gives. Another world: the samples left are dealt anew.
        self.loader.load_state_dict(own if own is not None else states)

    def _gather(self, own: dict[str, Any]) -> list[dict[str, Any]]:
        world_size = int(own.get("sampler", {}).get("world_size", 1))
        group = process_group()
        if group is None:
            if world_size == 1:
                return [own]
            raise RuntimeError(
                f"the loader is one of {world_size} ranks, but no torch.distributed process group is initialized "
                "to gather their states through (call torch.distributed.init_process_group first)"
            )
        if group.get_world_size() != world_size:
            raise RuntimeError(f"the loader was made for {world_size} ranks, the process group has {group.get_world_size()}")
        states: list[Any] = [None] * world_size
        group.all_gather_object(states, own)
        return states


def read_state_file(path: Any) -> Any:
    """The JSON of a saved loader state file (a trainer's checkpoint holds it): untrusted input,
    so no more than `MAX_STATE_FILE_BYTES` of it is read.

    Args:
        path: A `pathlib.Path` or an ``etils.epath.Path`` (Orbax's).

    Raises:
        ValueError: The file is larger than `MAX_STATE_FILE_BYTES` or not JSON (the message
            names it).
        OSError: It cannot be read.
    """
    with path.open("rb") as file:
        data = file.read(MAX_STATE_FILE_BYTES + 1)  # never more than the bound, whatever the file's size
    if len(data) > MAX_STATE_FILE_BYTES:
        raise ConfigurationError(f"{path}: more than {MAX_STATE_FILE_BYTES:,} bytes is not a loader state")
    try:
        return parse_json(data, str(path), max_bytes=MAX_STATE_FILE_BYTES)
    except JsonError as error:  # not JSON, or past the reader's bounds
        raise ConfigurationError(f"{path}: not a loader state file ({error.reason})") from error


def _own_state(states: list[Any]) -> dict[str, Any] | None:
    """This rank's own state when ``states`` were saved by a world of this process's size."""
    group = process_group()
    rank, world_size = (group.get_rank(), group.get_world_size()) if group is not None else (0, 1)
    if len(states) != world_size:
        return None
    own = states[rank]
    sampler = own.get("sampler") if isinstance(own, dict) else None
    if isinstance(sampler, dict) and sampler.get("rank") == rank and sampler.get("world_size") == world_size:
        return own
    return None
