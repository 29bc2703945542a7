"""A short Accelerate training loop fed by stoker (`AcceleratedLoader`), as a user would write
one: the Loader registered for checkpointing, ``save_state`` every 4 steps, two CPU processes
under torchrun.

    torchrun --nproc-per-node=2 tests/accelerate/accelerate_job.py WORK --attempt N [--kill-at STEP] [--resume FOLDER]

Each rank appends ``{"step", "epoch", "rank", "keys"}`` per step to ``WORK/log-<attempt>-<rank>.jsonl``
(padding left out). ``--kill-at STEP``: rank 0 kills itself (SIGKILL) at that step, and torchrun
ends the other rank and fails the job.
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
from stoker_testbed.resume_runs import mark_finished

SAMPLES = 203


def decode_value(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.float32).copy()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--kill-at", type=int, default=-1)
    parser.add_argument("--resume", type=Path, default=None)
    args = parser.parse_args()
    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    storage = MemoryStorage({f"s{index:04d}": np.float32(index).tobytes() for index in range(SAMPLES)})
    sampling = Sampling(shuffle="uniform", seed=5, in_order=True)  # rank and world size from the process group
    loader = AcceleratedLoader(Loader(storage, batch_size=6, sampling=sampling, decode=decode_value), accelerator)
    accelerator.register_for_checkpointing(loader)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    step = 0
    if args.resume is not None:
        accelerator.load_state(str(args.resume))
        step = json.loads((args.resume / "step.json").read_text())["step"]
    log = args.work / f"log-{args.attempt}-{rank}.jsonl"
    for epoch in range(loader.loader.sampler.epoch, 2):
        loader.set_epoch(epoch)  # a resumed epoch goes on where it was
        for batch in loader:
            if step == args.kill_at and rank == 0:
                (args.work / f"killed-{args.attempt}").touch()  # the test knows the kill for its own
                os.kill(os.getpid(), signal.SIGKILL)
            keys = [key for key, padding in zip(batch["keys"], batch["padding"].tolist()) if not padding]
            with open(log, "a") as file:
                file.write(json.dumps({"step": step, "epoch": epoch, "rank": rank, "keys": keys}) + "\n")
            values = torch.from_numpy(np.stack(batch["data"])).to(accelerator.device) / SAMPLES
            loss = torch.nn.functional.mse_loss(model(values), values)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step % 4 == 0:
                folder = args.work / f"state-{step}"
                accelerator.save_state(str(folder))
                if accelerator.is_main_process:
                    (folder / "step.json").write_text(json.dumps({"step": step}))
                accelerator.wait_for_everyone()
    mark_finished(args.work, args.attempt, rank)
    # Gloo's threads end before the interpreter does: a process group left to the exit's
    # destructors aborts a rank now and then ("terminate called without an active exception",
    # pytorch/pytorch issue 190489), which a test would take for the job failing.
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
