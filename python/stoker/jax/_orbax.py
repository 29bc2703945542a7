"""A Loader's state in an Orbax checkpoint, beside the model's: each process writes its own
Loader state into the checkpoint's folder (as Grain does for its iterators), and on restore
continues it, or with another number of processes deals the rest of the epoch over them."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import orbax.checkpoint as ocp

from ..distributed import read_state_file
from ..errors import ConfigurationError
from ..loader import Loader

__all__ = ["LoaderCheckpointHandler", "LoaderRestore", "LoaderSave"]

_PREFIX = "loader-process-"
_STATE_FILE = re.compile(rf"{_PREFIX}(\d{{1,6}})-of-(\d{{1,6}})\.json")


class LoaderCheckpointHandler(ocp.CheckpointHandler):
    """Orbax's handler for a stoker Loader: used through `LoaderSave` and `LoaderRestore` in a
    ``CheckpointManager``'s ``Composite`` (see docs/jax.md); not called directly."""

    def save(self, directory: Any, args: LoaderSave) -> None:
        """Writes this process's Loader state (``loader-process-<i>-of-<n>.json``)."""
        import jax

        index, count = jax.process_index(), jax.process_count()
        (directory / f"{_PREFIX}{index}-of-{count}.json").write_text(json.dumps(args.state))

    def restore(self, directory: Any, args: LoaderRestore) -> Loader:
        """Loads the saved state into ``args.loader``: this process's own where the checkpoint
        has as many processes, else every process's (the rest of the epoch dealt anew).

        Raises:
            ValueError: No Loader state in ``directory``, or states the Loader refuses.
        """
        import jax

        named = {path: _STATE_FILE.fullmatch(path.name) for path in directory.glob(f"{_PREFIX}*.json")}
        found = sorted((int(match[1]), int(match[2]), path) for path, match in named.items() if match)
        if not found:
            raise ConfigurationError(f"{directory}: no stoker Loader state ({_PREFIX}<i>-of-<n>.json) in this checkpoint")
        count = found[0][1]
        if [(index, total) for index, total, _ in found] != [(index, count) for index in range(count)]:
            raise ConfigurationError(f"{directory}: the Loader states are incomplete ({sorted(path.name for *_, path in found)})")
        saved = [path for *_, path in found]
        if len(saved) == jax.process_count():
            args.loader.load_state_dict(read_state_file(saved[jax.process_index()]))
        else:
            args.loader.load_state_dict([read_state_file(path) for path in saved])
        return args.loader

    def metadata(self, directory: Any) -> None:
        """Nothing beyond the files (Orbax asks every handler)."""
        return None

    def finalize(self, directory: Any) -> None:
        """Nothing to finish: the file is written whole by `save`."""

    def close(self) -> None:
        """Holds nothing open."""


@ocp.args.register_with_handler(LoaderCheckpointHandler, for_save=True)
@dataclasses.dataclass
class LoaderSave(ocp.args.CheckpointArgs):
    """``loader=LoaderSave(loader)`` in ``manager.save(step, args=ocp.args.Composite(...))``.

    The state is taken when this is made, in the training loop's thread, so that an
    asynchronous save writes the Loader's place at the same step as the parameters."""

    loader: Loader
    state: dict[str, Any] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.state = self.loader.state_dict()


@ocp.args.register_with_handler(LoaderCheckpointHandler, for_restore=True)
@dataclasses.dataclass
class LoaderRestore(ocp.args.CheckpointArgs):
    """``loader=LoaderRestore(loader)`` in ``manager.restore(step, args=ocp.args.Composite(...))``:
    the Loader continues from the checkpoint."""

    loader: Loader
