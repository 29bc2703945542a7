"""Whether a Trainer's checkpoints let ``fit(ckpt_path="last")`` resume mid-epoch, and if not,
the words that say what to set.

Two things stop it with Lightning's defaults, and both look like a resume that silently starts
over: the default ``ModelCheckpoint`` saves at each epoch's end only and writes no
``last.ckpt``; and a ``last.ckpt`` saved in the logger's folder for the run
(``lightning_logs/version_N/checkpoints``, where a ``ModelCheckpoint`` without ``dirpath``
saves) is not found by the restarted run, which logs to a new version and looks for it there.
"""

from __future__ import annotations

import os
from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint

__all__ = ["RESUME_CALLBACK", "checkpoint_advice"]

# What docs/lightning.md tells a user to add to the Trainer's callbacks.
RESUME_CALLBACK = 'ModelCheckpoint(dirpath="checkpoints", save_last=True, every_n_train_steps=N)'


def checkpoint_advice(trainer: Any) -> str | None:
    """What the Trainer lacks for a mid-epoch resume with ``fit(ckpt_path="last")``, in words
    naming what to set; None when nothing is missing, or when what is saved is the user's
    choice: checkpointing off (``enable_checkpointing=False``, ``fast_dev_run``), a
    ``last.ckpt`` saved at epochs' ends only (``save_last=True`` without a step or time
    interval), or mid-epoch saves without ``save_last`` (resumed from a file the user names).

    Called once the Trainer's callbacks are set up (each ``ModelCheckpoint`` knows its folder).
    """
    callbacks = [callback for callback in trainer.checkpoint_callbacks if isinstance(callback, ModelCheckpoint)]
    if not callbacks or trainer.fast_dev_run:
        return None
    saving_last = [callback for callback in callbacks if callback.save_last]
    if not saving_last:
        if any(_saves_mid_epoch(callback) for callback in callbacks):
            # Mid-epoch saves without save_last: the user resumes from a file they name (and
            # Lightning's own warning says to set save_last if they ask for "last").
            return None
        return (
            "no ModelCheckpoint of this Trainer saves mid-epoch (Lightning's default one saves at each epoch's end, "
            'and no last.ckpt): after a crash, fit(ckpt_path="last") resumes from the last epoch\'s end at best, or '
            f"starts over. To resume mid-epoch, pass Trainer(callbacks=[{RESUME_CALLBACK}])"
        )
    in_run_folder = [callback for callback in saving_last if _in_the_loggers_run_folder(callback, trainer)]
    if len(in_run_folder) == len(saving_last):
        return (
            f"ModelCheckpoint saves last.ckpt in {in_run_folder[0].dirpath}, the logger's folder for this run: a "
            'restarted run logs to a new version (unless the logger\'s version is fixed) and fit(ckpt_path="last") '
            f"looks for last.ckpt there, finds none and starts over. Give the callback a folder of its own: {RESUME_CALLBACK}"
        )
    # A last.ckpt a restart finds: saved mid-epoch, or at epochs' ends by the user's choice (a
    # resume then goes on from the last epoch's end, exactly).
    return None


def _saves_mid_epoch(callback: ModelCheckpoint) -> bool:
    # Lightning keeps these two triggers private (every_n_epochs alone is public); both have
    # been there since Lightning 1.5.
    steps = getattr(callback, "_every_n_train_steps", 0) or 0
    return steps >= 1 or getattr(callback, "_train_time_interval", None) is not None


def _in_the_loggers_run_folder(callback: ModelCheckpoint, trainer: Any) -> bool:
    """Whether ``callback`` saves where Lightning puts a ``ModelCheckpoint`` without
    ``dirpath``: ``<save_dir>/<name>/<version>/checkpoints`` of the first logger."""
    if not trainer.loggers or callback.dirpath is None:
        return False
    logger = trainer.loggers[0]
    save_dir = logger.save_dir if logger.save_dir is not None else trainer.default_root_dir
    version = logger.version if isinstance(logger.version, str) else f"version_{logger.version}"
    run_folder = os.path.join(save_dir, str(logger.name), version, "checkpoints")
    return os.path.realpath(callback.dirpath) == os.path.realpath(run_folder)
