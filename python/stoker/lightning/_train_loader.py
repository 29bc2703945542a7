"""A stoker `Loader` as Lightning's fit loop takes a train loader: torch tensors, the epoch set by
Lightning, and the Loader's exact state in Lightning's own checkpoints."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..device import as_tensors
from ..distributed import LoaderCheckpoint
from ..loader import Loader

__all__ = ["LightningLoader"]


class _EpochSetter:
    """What Lightning calls at each epoch's start (``loader.sampler.set_epoch(epoch)``, as for a
    torch ``DistributedSampler``), routed to the Loader so that its delivery record follows."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def set_epoch(self, epoch: int) -> None:
        # The same epoch after a mid-epoch resume: the loaded state already says where it is.
        if epoch != self._loader.sampler.epoch:
            self._loader.set_epoch(epoch)


class LightningLoader:
    """``train_dataloader()``'s return value: batches as dicts of torch tensors, and the Loader's
    state saved in Lightning's checkpoints and restored by ``fit(ckpt_path=...)`` exactly.

    Lightning keeps a train loader's state when the loader has ``state_dict`` and
    ``load_state_dict`` (its "stateful" loaders): this one saves every rank's Loader state (a
    checkpoint is written by rank 0 alone), and on resume each rank continues its own plan, or
    with another number of ranks the rest of the epoch is dealt over the new ones. Lightning's
    epoch reaches the Loader through ``sampler.set_epoch``, as it does for torch's samplers; a
    torch ``DataLoader`` is what Lightning would wrap with a ``DistributedSampler``, and this is
    not one, so no sampler is injected and ``use_distributed_sampler`` does not matter.

    Each batch is `stoker.device.as_tensors`'s dict (``data``, ``labels``, ``valid``,
    ``padding``, ``keys``, ``index``), sharing the Loader's batch memory; Lightning moves it to
    the device. With ``Sampling(in_order=True)`` a resumed run's batches are, step for step,
    those of an uninterrupted run; by default batches are handed over as they complete (the
    same batches, possibly in another order).

    Args:
        loader: This rank's Loader (its rank and world size those of the Lightning strategy).
    """

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.sampler = _EpochSetter(loader)
        self._checkpoint = LoaderCheckpoint(loader)

    def __len__(self) -> int:
        """Batches in this rank's whole epoch: Lightning counts from the epoch's start, also after
        a mid-epoch resume (then the Loader yields only those left)."""
        return self.loader.epoch_batches

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self.loader:
            yield as_tensors(batch)

    def state_dict(self) -> dict[str, Any]:
        """Every rank's Loader state (a collective call: Lightning makes it on every rank when it
        saves a checkpoint)."""
        return self._checkpoint.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint's loader state.

        Raises:
            ValueError: Not a stoker loader state, or one the Loader refuses (another dataset,
                seed or shuffle: the message says what differs).
        """
        self._checkpoint.load_state_dict(state)
