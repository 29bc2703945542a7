"""A stoker `Loader` as Lightning's validation loop takes one: the whole validation set at each
validation, in the Loader's order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..device import as_tensors
from ..loader import Loader

__all__ = ["ValidationLoader"]


class ValidationLoader:
    """``val_dataloader()``'s return value: batches as dicts of torch tensors (as
    `LightningLoader`'s), the whole of the Loader's epoch each time Lightning iterates it.

    Lightning iterates one validation loader many times: its sanity check reads the first
    batches and stops, then each validation reads all of it. A Loader goes on where its epoch
    was, so each iteration here after the first starts a new epoch (the same order with
    ``shuffle="none"``). Nothing of it is saved in checkpoints: Lightning starts a validation
    over after a resume. It has no ``sampler``: Lightning then takes it for an unshuffled loader
    with nothing to set each epoch.

    Args:
        loader: This rank's validation Loader.
    """

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def __len__(self) -> int:
        """Batches in this rank's whole validation set."""
        return self.loader.epoch_batches

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.loader.sampler.delivered_count:  # read before (whole, or a sanity check's first batches)
            self.loader.set_epoch(self.loader.sampler.epoch + 1)
        for batch in self.loader:
            yield as_tensors(batch)
