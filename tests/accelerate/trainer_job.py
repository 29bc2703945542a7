"""A short Hugging Face Trainer run fed by stoker (`StokerTrainer`), as a user would write one,
two CPU processes under torchrun, a checkpoint every 4 steps.

    torchrun --nproc-per-node=2 tests/accelerate/trainer_job.py WORK --attempt N [--kill-at STEP] [--resume CKPT|latest]

or as one process (``python tests/accelerate/trainer_job.py ...``, as docs/accelerate.md's script runs).

Each rank appends ``{"step", "rank", "keys"}`` per step to ``WORK/log-<attempt>-<rank>.jsonl``
(padding left out). ``--kill-at STEP``: rank 0 kills itself (SIGKILL) at that step's start, and torchrun ends
the other rank and fails the job, as when a machine dies.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback, TrainingArguments

from stoker.accelerate import StokerTrainer
from stoker.loader import Sampling
from stoker.storage import MemoryStorage
from stoker_testbed.resume_runs import mark_finished

SAMPLES = 203


def decode_value(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.float32).copy()


def model_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """What the model's forward takes: the values, and the keys of the real (not padding) samples."""
    keys = [key for key, padding in zip(batch["keys"], batch["padding"].tolist()) if not padding]
    return {"values": torch.from_numpy(np.stack(batch["data"])), "keys": keys}


class Model(torch.nn.Module):
    def __init__(self, log: Path) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.log, self.step = log, -1

    def forward(self, values: torch.Tensor, keys: list[str]) -> dict[str, torch.Tensor]:
        with open(self.log, "a") as log:
            log.write(json.dumps({"step": self.step, "rank": int(os.environ.get("RANK", 0)), "keys": keys}) + "\n")
        inputs = values / SAMPLES
        return {"loss": torch.nn.functional.mse_loss(self.layer(inputs), inputs)}


class Steps(TrainerCallback):
    """Tells the model its step; rank 0 dies at ``kill_at``."""

    def __init__(self, model: Model, kill_at: int, attempt: int) -> None:
        self.model, self.kill_at, self.attempt = model, kill_at, attempt

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.model.step = state.global_step
        if state.global_step == self.kill_at and args.process_index == 0:
            (self.model.log.parent / f"killed-{self.attempt}").touch()  # the test knows the kill for its own
            os.kill(os.getpid(), signal.SIGKILL)


def main(arguments: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--kill-at", type=int, default=-1)
    parser.add_argument("--resume", default=None, help="a checkpoint folder, or 'latest': train(resume_from_checkpoint=True)")
    parser.add_argument("--accumulate", type=int, default=1, help="gradient_accumulation_steps")
    args = parser.parse_args(arguments)
    model = Model(args.work / f"log-{args.attempt}-{os.environ.get('RANK', 0)}.jsonl")
    training = TrainingArguments(
        output_dir=str(args.work / "out"),
        per_device_train_batch_size=6,
        num_train_epochs=2,
        save_strategy="steps",
        save_steps=4,
        use_cpu=True,
        report_to=[],
        logging_strategy="no",
        learning_rate=0.1,
        seed=0,
        gradient_accumulation_steps=args.accumulate,
    )
    storage = MemoryStorage({f"s{index:04d}": np.float32(index).tobytes() for index in range(SAMPLES)})
    trainer = StokerTrainer(
        model=model,
        args=training,
        train_storage=storage,
        sampling=Sampling(shuffle="uniform", seed=5, in_order=True),
        loader_options={"decode": decode_value},
        inputs=model_inputs,
        callbacks=[Steps(model, args.kill_at, args.attempt)],
    )
    trainer.train(resume_from_checkpoint=True if args.resume == "latest" else args.resume)
    mark_finished(args.work, args.attempt, int(os.environ.get("RANK", 0)))
    # Gloo's threads end before the interpreter does: a process group left to the exit's
    # destructors aborts a rank now and then ("terminate called without an active exception",
    # pytorch/pytorch issue 190489), which a test would take for the job failing.
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
