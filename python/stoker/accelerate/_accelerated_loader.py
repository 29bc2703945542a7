"""A stoker `Loader` in a Hugging Face Accelerate loop: batches on the accelerator's device, and
the Loader's exact place in ``accelerator.save_state`` / ``load_state``."""

from __future__ import annotations

import warnings
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
        for epoch in range(loader.epoch, epochs):  # from the checkpoint's epoch on a resume
            loader.set_epoch(epoch)
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
        self._loaded = False  # a state was loaded, and no set_epoch came since

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

    @property
    def epoch(self) -> int:
        """The epoch a training loop goes on with: the Loader's, or the next one once the
        Loader's is finished (a state saved at an epoch's end). After ``load_state``, ``for epoch
        in range(loader.epoch, epochs)`` continues where the checkpoint was."""
        sampler = self.loader.sampler
        finished = sampler.delivered_count > 0 and len(sampler) == 0
        return sampler.epoch + 1 if finished else sampler.epoch

    @property
    def step(self) -> int:
        """Batches this rank's loop was handed since the run began, carried by ``save_state`` and
        ``load_state`` (`Loader.step`): a count to save every N steps by that a resume goes on."""
        return self.loader.step

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` unless the Loader is already in it (a resumed epoch goes on).

        The first call after ``load_state`` with an epoch before `epoch` (a loop starting at 0
        again) warns: the loop would train again what the checkpoint had trained."""
        if self._loaded and epoch < self.epoch:
            warnings.warn(
                f"set_epoch({epoch}) after load_state, whose Loader state goes on with epoch {self.epoch}: this loop trains "
                "again what the checkpoint had trained. Loop over range(loader.epoch, epochs) to go on where it was",
                stacklevel=2,
            )
        self._loaded = False
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
        self._loaded = True
