"""A short Lightning training run over stoker, as a user would write one: `StokerDataModule`,
DDP on CPU (gloo), a checkpoint every 4 steps by Lightning's own `ModelCheckpoint`.

    python tests/lightning/fit_job.py WORK --run N [--devices 2] [--kill-at STEP] [--resume CKPT]

Each rank appends ``{"run", "epoch", "step", "rank", "keys"}`` per training step to
``WORK/log-<run>-<rank>.jsonl`` (written before the step's optimizer update). ``--kill-at STEP``:
rank 0 kills every process of the job (SIGKILL, its process group) when it reaches that step.
The test starts it in a session of its own, so that kill ends the job and nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from stoker.lightning import StokerDataModule
from stoker.loader import Sampling
from stoker.storage import MemoryStorage
from stoker.torch import DataLoader
from stoker_testbed.resume_runs import mark_finished

SAMPLES = 203  # not a multiple of the ranks or the batch


def decode_index(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.float32).copy()


class Model(L.LightningModule):
    def __init__(self, work: Path, run: int, kill_at: int) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.work, self.run, self.kill_at = work, run, kill_at

    def training_step(self, batch: dict[str, Any], batch_index: int) -> torch.Tensor:
        if self.global_step == self.kill_at and self.global_rank == 0:
            os.killpg(os.getpgrp(), signal.SIGKILL)
        record = {
            "run": self.run,
            "epoch": self.current_epoch,
            "step": self.global_step,
            "rank": self.global_rank,
            "keys": [key for key, padding in zip(batch["keys"], batch["padding"]) if not padding],
        }
        with open(self.work / f"log-{self.run}-{self.global_rank}.jsonl", "a") as log:
            log.write(json.dumps(record) + "\n")
        inputs = torch.from_numpy(np.stack(batch["data"])) / SAMPLES
        return torch.nn.functional.mse_loss(self.layer(inputs), inputs)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Items(torch.utils.data.Dataset[dict[str, Any]]):
    """The same samples as a map-style dataset, for `stoker.torch.DataLoader`."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"data": np.float32(index).reshape(1), "keys": f"s{index:04d}", "padding": False}


class TorchStyle(L.LightningDataModule):
    """`stoker.torch.DataLoader` in Lightning: not a torch DataLoader, so Lightning injects no
    sampler; the user gives it a `DistributedSampler` (Lightning still calls its set_epoch)."""

    def train_dataloader(self) -> Any:
        sampler = torch.utils.data.DistributedSampler(Items(), num_replicas=self.trainer.world_size, rank=self.trainer.global_rank, seed=5)
        return DataLoader(Items(), batch_size=6, sampler=sampler, num_workers=1, collate_fn=collate)


def collate(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"data": [item["data"] for item in items], "keys": [item["keys"] for item in items], "padding": [False] * len(items)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--kill-at", type=int, default=-1)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--torch-style", action="store_true", help="stoker.torch.DataLoader with a DistributedSampler instead")
    args = parser.parse_args()
    storage = MemoryStorage({f"s{index:04d}": np.float32(index).tobytes() for index in range(SAMPLES)})
    data: Any = StokerDataModule(storage, batch_size=6, sampling=Sampling(shuffle="uniform", seed=5, in_order=True), decode=decode_index)
    if args.torch_style:
        data = TorchStyle()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        max_epochs=2,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(dirpath=args.work / "checkpoints", every_n_train_steps=4, save_top_k=-1)],
    )
    trainer.fit(Model(args.work, args.run, args.kill_at), datamodule=data, ckpt_path=args.resume)
    mark_finished(args.work, args.run, trainer.global_rank)
    # Gloo's threads end before the interpreter does: a process group left to the exit's
    # destructors aborts a rank now and then ("terminate called without an active exception",
    # pytorch/pytorch issue 190489), which a test would take for the job failing.
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
