"""A stoker `Loader` in a Hugging Face Accelerate loop: batches on the accelerator's device, and
the Loader's exact place in ``accelerator.save_state`` / ``load_state``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..device import as_tensors, to_device
from ..distributed import LoaderCheckpoint
from ..loader import Loader

__all__ = ["AcceleratedLoader"]

Inputs = Callable[[dict[str, Any]], Any]


class AcceleratedLoader:
    """Wrap this rank's Loader for an Accelerate loop, instead of ``accelerator.prepare`` (which
    wraps torch DataLoaders only: it hands anything else back untouched, on the CPU, and
    Accelerate's own resume would re-read and discard the epoch's first batches)::

        loader = AcceleratedLoader(Loader(path, batch_size=64, transform=...), accelerator)
        accelerator.register_for_checkpointing(loader)
        model, optimizer = accelerator.prepare(model, optimizer)
        accelerator.load_state(folder)  # on a resume: the Loader continues where it was
        for batch in loader: ...

    Batches reach the device one ahead on a side stream where it is CUDA (`stoker.device.
    to_device`; batches read ahead are not counted as delivered), and are `stoker.device.
    as_tensors`'s dict, or whatever ``inputs`` makes of it (the model's keyword arguments).
    ``register_for_checkpointing`` saves `state_dict`: every rank's Loader state (Accelerate
    writes it from the main process only); on ``load_state`` each rank continues its own plan, or
    with another number of processes the rest of the epoch is dealt over the new ones.

    Args:
        loader: This process's Loader (rank and world size those of the process group).
        accelerator: The ``accelerate.Accelerator``: its device; None: the CPU.
        inputs: Maps a batch's dict to what the loop takes (default: the dict itself).
    """

    def __init__(self, loader: Loader, accelerator: Any = None, inputs: Inputs | None = None) -> None:
        self.loader = loader
        self.device = str(accelerator.device) if accelerator is not None else "cpu"
        self.inputs: Inputs = inputs or (lambda batch: batch)
        self._checkpoint = LoaderCheckpoint(loader)

    def __len__(self) -> int:
        """Batches in this rank's whole epoch (`Loader.epoch_batches`): what schedulers and the
        HF Trainer count an epoch in, also after a mid-epoch resume."""
        return self.loader.epoch_batches

    def __iter__(self) -> Iterator[Any]:
        if self.device.startswith("cuda"):
            for moved in to_device(self.loader, self.device):
                yield self.inputs(as_tensors(moved))
        else:
            for batch in self.loader:
                yield self.inputs(as_tensors(batch))

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` unless the Loader is already in it (a resumed epoch goes on)."""
        if epoch != self.loader.sampler.epoch:
            self.loader.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """Every rank's Loader state (a collective call: ``save_state`` runs on every process)."""
        return self._checkpoint.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a saved state (see the class notes).

        Raises:
            ValueError: Not a stoker loader state, or one the Loader refuses (another dataset,
                seed or shuffle: the message says what differs).
        """
        self._checkpoint.load_state_dict(state)
