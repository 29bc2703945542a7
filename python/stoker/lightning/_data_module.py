"""A LightningDataModule over a stoker storage: the Loader made per rank from the Trainer's
strategy, its state in Lightning's checkpoints."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ..loader import Loader, Sampling
from ..storage import Storage
from ._train_loader import LightningLoader
from ._validation_loader import ValidationLoader

try:
    from lightning.pytorch import LightningDataModule
    from lightning.pytorch.utilities import rank_zero_warn

    from ._checkpoint_advice import checkpoint_advice
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError("stoker.lightning needs PyTorch Lightning: pip install 'stoker[lightning]'") from error

__all__ = ["StokerDataModule"]


class StokerDataModule(LightningDataModule):
    """``trainer.fit(model, datamodule=StokerDataModule("shards/", batch_size=64, transform=...))``.

    Each rank's `Loader` is made when Lightning asks for it, with the rank and world size of
    the Trainer's strategy (so ``Sampling`` leaves them out); its state is saved in every
    Lightning checkpoint and ``fit(ckpt_path=...)`` resumes it mid-epoch exactly: the batches
    after the resume are those an uninterrupted run gives, none repeated or lost. Batches are
    dicts of tensors (see `LightningLoader`).

    A mid-epoch resume needs a checkpoint saved mid-epoch, which Lightning's default Trainer
    does not write: ``Trainer(callbacks=[ModelCheckpoint(dirpath="checkpoints", save_last=True,
    every_n_train_steps=N)])`` does, where ``fit(ckpt_path="last")`` finds it after a restart.
    When the Trainer has no such callback, the first ``fit`` warns, naming what to set (the
    checkpoints are the Trainer's: how often a model is worth saving is the user's choice).

    Args:
        storage: The training data (a `Storage` or a path or URL `Loader` takes).
        batch_size: Samples per batch and rank.
        val_storage: Validation data, read in order (no shuffle) with the same options; None:
            no validation loader (and no validation loop: Lightning runs one only for a data
            module with a ``val_dataloader``).
        sampling: Seed, shuffle and the rest (`Sampling`); rank and world size are the Trainer's.
        **loader_options: Any other `Loader` keyword (transform, decode, reads, throughput...).
    """

    def __init__(
        self,
        storage: Storage | str | os.PathLike[str],
        *,
        batch_size: int,
        val_storage: Storage | str | os.PathLike[str] | None = None,
        sampling: Sampling | None = None,
        **loader_options: Any,
    ) -> None:
        super().__init__()
        self.storage = storage
        self.val_storage = val_storage
        self.batch_size = batch_size
        self.sampling = sampling or Sampling()
        self.loader_options = loader_options
        self._advised = False
        if val_storage is not None:
            # Lightning counts a data module as having validation data when it overrides
            # val_dataloader, and then warns of a model without validation_step: the method
            # exists here only with validation data.
            self.val_dataloader = self._validation_loader  # type: ignore[method-assign]

    def _sampling(self, **changes: Any) -> Sampling:
        trainer = self.trainer
        if trainer is None:  # used outside a Trainer: the Loader finds the rank itself
            return dataclasses.replace(self.sampling, **changes)
        return dataclasses.replace(self.sampling, rank=trainer.global_rank, world_size=trainer.world_size, **changes)

    def train_dataloader(self) -> LightningLoader:
        """This rank's training Loader (a new one each time Lightning asks: it loads the
        checkpoint's state into it on a resume). The first time, a warning says what the
        Trainer lacks for a mid-epoch resume with ``fit(ckpt_path="last")``, if anything."""
        if self.trainer is not None and not self._advised:
            self._advised = True
            advice = checkpoint_advice(self.trainer)
            if advice is not None:
                rank_zero_warn(f"StokerDataModule: {advice}")
        return LightningLoader(Loader(self.storage, batch_size=self.batch_size, sampling=self._sampling(), **self.loader_options))

    def _validation_loader(self) -> ValidationLoader:
        """This rank's validation Loader, in storage order, read whole at each validation
        (``val_dataloader`` with ``val_storage``)."""
        assert self.val_storage is not None
        sampling = self._sampling(shuffle="none")
        return ValidationLoader(Loader(self.val_storage, batch_size=self.batch_size, sampling=sampling, **self.loader_options))
