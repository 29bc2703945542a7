"""docs/accelerate.md's Accelerate loop as a user runs it (``python documented_loop_job.py``: one
process, Accelerate's defaults on the CPU): the Loader registered for checkpointing,
``save_state`` to one folder every N steps, and on a restart ``load_state`` from it and the
epochs from ``loader.epoch`` on.

    python tests/accelerate/documented_loop_job.py WORK --attempt N --save-every N [--kill-at STEP]

Appends ``{"step", "epoch", "rank", "keys"}`` per step to ``WORK/log-<attempt>-0.jsonl``
(padding left out); ``--kill-at STEP``: SIGKILLs itself at that step, before training on it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path

import numpy as np
import torch
from accelerate import Accelerator

from stoker import Loader
from stoker.accelerate import AcceleratedLoader
from stoker.loader import Sampling
from stoker.storage import MemoryStorage

SAMPLES = 203


def decode_value(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.float32).copy()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--save-every", type=int, required=True)
    parser.add_argument("--kill-at", type=int, default=-1)
    args = parser.parse_args()
    checkpoint = args.work / "checkpoint"

    accelerator = Accelerator(cpu=True)
    storage = MemoryStorage({f"s{index:04d}": np.float32(index).tobytes() for index in range(SAMPLES)})
    loader = AcceleratedLoader(Loader(storage, batch_size=6, sampling=Sampling(seed=5, in_order=True), decode=decode_value), accelerator)
    accelerator.register_for_checkpointing(loader)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    if checkpoint.is_dir():  # after a crash
        accelerator.load_state(str(checkpoint))
    for epoch in range(loader.epoch, 2):
        loader.set_epoch(epoch)
        for batch in loader:
            step = loader.step - 1  # this batch's
            if step == args.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            keys = [key for key, padding in zip(batch["keys"], batch["padding"].tolist()) if not padding]
            with open(args.work / f"log-{args.attempt}-0.jsonl", "a") as log:
                log.write(json.dumps({"step": step, "epoch": epoch, "rank": 0, "keys": keys}) + "\n")
            values = torch.from_numpy(np.stack(batch["data"])) / SAMPLES
            loss = torch.nn.functional.mse_loss(model(values), values)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            if loader.step % args.save_every == 0:
                accelerator.save_state(str(checkpoint))


if __name__ == "__main__":
    main()
