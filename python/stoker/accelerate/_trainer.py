"""Hugging Face's `Trainer` fed by a stoker Loader, its place saved in each checkpoint folder and
resumed from it: the resumed epoch reads only what it had not delivered."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .._bounded import folder_entries, shown_logger
from ..distributed import read_state_file
from ..errors import ConfigurationError
from ..loader import Loader, Sampling
from ..storage import Storage
from ._accelerated_loader import AcceleratedLoader, Inputs

__all__ = ["LOADER_STATE_NAME", "StokerTrainer"]

_logger = shown_logger("stoker.accelerate")

# The Loader's state in each checkpoint folder, beside the Trainer's own files.
LOADER_STATE_NAME = "stoker_loader.json"
_CHECKPOINT_FOLDER = re.compile(rf"{PREFIX_CHECKPOINT_DIR}-(\d+)")


class StokerTrainer(Trainer):
    """``transformers.Trainer`` whose training batches come from a stoker `Loader`, one per
    process, with the batch size ``per_device_train_batch_size`` and the rank and world size of
    the Trainer's processes. Each checkpoint folder gets the Loader's state of every rank
    (``stoker_loader.json``); ``train(resume_from_checkpoint=...)`` (a folder, or True for the
    latest) continues each rank's epoch where it was, instead of the Trainer's usual re-reading
    and discarding of the epoch's first batches (``ignore_data_skip`` is set for that, and said
    in the log).

        trainer = StokerTrainer(model=model, args=TrainingArguments(...), train_storage="shards/",
                                sampling=Sampling(seed=0), loader_options={"transform": transform},
                                inputs=lambda batch: {"pixel_values": batch["data"], "labels": batch["labels"]})

    Args:
        *args: As `transformers.Trainer` (``train_dataset`` is not used).
        train_storage: The training data (a `Storage` or a path or URL `Loader` takes).
        sampling: Seed, shuffle and the rest; rank and world size are the Trainer's.
        loader_options: Other `Loader` keywords (transform, decode, reads, throughput...).
        inputs: Maps `stoker.device.as_tensors`'s dict of a batch to the model's keyword
            arguments (default: the dict itself).
        **kwargs: As `transformers.Trainer`.
    """

    def __init__(
        self,
        *args: Any,
        train_storage: Storage | str | os.PathLike[str],
        sampling: Sampling | None = None,
        loader_options: dict[str, Any] | None = None,
        inputs: Inputs | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.train_storage = train_storage
        self.sampling = sampling or Sampling()
        self.loader_options = dict(loader_options or {})
        self.inputs = inputs
        self.train_loader: AcceleratedLoader | None = None
        self._resume_from: str | None = None
        if not self.args.ignore_data_skip:
            _logger.info("ignore_data_skip=True: the stoker Loader resumes its epoch itself, without re-reading its first batches")
            self.args.ignore_data_skip = True
        self.add_callback(_SaveLoaderState(self))

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any) -> Any:
        """As `transformers.Trainer.train`; the Loader resumes from the checkpoint's loader state.

        ``resume_from_checkpoint=True`` takes the latest checkpoint folder that holds the
        Loader's state: one without it (a run stopped between the Trainer's save and the
        Loader's, which comes last) is passed over, and named in the log.

        Raises:
            FileNotFoundError: The checkpoint folder has no stoker loader state (saved by
                another Trainer); the message names the file looked for.
            ValueError: The loader state file is not one (too large, not JSON, refused by the
                Loader); the message names it or what differs. Or no checkpoint folder at all
                for ``resume_from_checkpoint=True``.
        """
        if resume_from_checkpoint is True:
            # TrainingArguments gives output_dir a default ("trainer_output") when None is passed.
            resume_from_checkpoint = _latest_checkpoint(Path(self.args.output_dir or "trainer_output"))
        self._resume_from = str(resume_from_checkpoint) if resume_from_checkpoint else None
        return super().train(resume_from_checkpoint or None, *args, **kwargs)

    def get_train_dataloader(self) -> Any:
        """This process's Loader, wrapped (`AcceleratedLoader`), at the checkpoint's place on a resume."""
        if self.args.per_device_train_batch_size < 1:
            raise ConfigurationError(f"per_device_train_batch_size must be >= 1, got {self.args.per_device_train_batch_size}")
        sampling = dataclasses.replace(self.sampling, rank=self.args.process_index, world_size=self.args.world_size)
        loader = Loader(self.train_storage, batch_size=self.args.per_device_train_batch_size, sampling=sampling, **self.loader_options)
        self.train_loader = AcceleratedLoader(loader, self.accelerator, self.inputs)
        if self._resume_from is not None:
            path = Path(self._resume_from) / LOADER_STATE_NAME
            if not path.is_file():
                raise FileNotFoundError(f"{path}: this checkpoint holds no stoker loader state (was it saved by a StokerTrainer?)")
            self.train_loader.load_state_dict(read_state_file(path))
            _logger.info("the Loader continues epoch %d from %s", loader.sampler.epoch, path)
            self._warn_of_a_split_accumulation(loader)
        return self.train_loader

    def _warn_of_a_split_accumulation(self, loader: Loader) -> None:
        """The Trainer counts a resumed epoch's batches from the resume (its own resume, which
        re-reads the epoch's first batches, counts from the start): with gradient accumulation
        over an epoch whose batch count it does not divide, the epoch's last, partial
        accumulation then ends no optimizer step. Said, since an uninterrupted run differs."""
        accumulate, batches = self.args.gradient_accumulation_steps, loader.epoch_batches
        mid_epoch = loader.sampler.delivered_count > 0 and len(loader.sampler) > 0
        if accumulate > 1 and batches % accumulate and mid_epoch:
            _logger.warning(
                "gradient_accumulation_steps=%d with %d batches an epoch: after a mid-epoch resume the Trainer steps this "
                "epoch's last %d batches together with the next epoch's first %d (or not at all in the last epoch), one "
                "optimizer step fewer than an uninterrupted run (the samples and their order are the same); an epoch of a "
                "multiple of %d batches resumes exactly",
                accumulate,
                batches,
                batches % accumulate,
                accumulate,
                accumulate,
            )


def _latest_checkpoint(output_dir: Path) -> str:
    """The latest ``checkpoint-N`` folder in ``output_dir`` holding the Loader's state, later
    ones without it named in the log; the latest of all when none holds it (refused then).

    Raises:
        ValueError: ``output_dir`` holds no checkpoint folder.
    """
    steps = {}
    if output_dir.is_dir():
        folders, _ = folder_entries(output_dir, skipped=[])  # an entry whose kind cannot be read is no checkpoint
        for name, _status in folders:
            match = _CHECKPOINT_FOLDER.fullmatch(name)
            if match is not None:
                steps[output_dir / name] = int(match.group(1))
    if not steps:
        raise ValueError(f"no valid checkpoint found in output directory ({output_dir})")
    latest_first = sorted(steps, key=steps.__getitem__, reverse=True)
    complete = next((folder for folder in latest_first if (folder / LOADER_STATE_NAME).is_file()), latest_first[0])
    passed_over = latest_first[: latest_first.index(complete)]
    if passed_over:
        _logger.warning(
            "%s: no %s (the run stopped while saving it?); resuming from %s, the latest checkpoint with the Loader's state",
            ", ".join(folder.name for folder in passed_over),
            LOADER_STATE_NAME,
            complete,
        )
    return str(complete)


class _SaveLoaderState(TrainerCallback):
    """Writes every rank's Loader state into the checkpoint folder the Trainer has just saved."""

    def __init__(self, trainer: StokerTrainer) -> None:
        self.trainer = trainer

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.trainer.train_loader is None:
            return
        saved = self.trainer.train_loader.state_dict()  # on every process: it gathers the ranks' states
        if args.should_save:
            folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            partial = folder / f".{LOADER_STATE_NAME}.partial"
            partial.write_text(json.dumps(saved))
            partial.replace(folder / LOADER_STATE_NAME)
