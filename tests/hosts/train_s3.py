"""A CPU (gloo) training loop for `torchrun` across hosts, reading an S3 store through each host's
node cache: tests/hosts/test_torchrun_hosts.py runs it on hosts made of network namespaces.

    torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=h0:29400 \\
        tests/hosts/train_s3.py WORK ENDPOINT CACHE

As tests/distributed/train.py: an all-reduce per step stands in for DDP's gradient sync, the
loader's place is saved with `torch.distributed.checkpoint` (WORK is a folder every host sees, as
a shared file system would be), and each rank appends ``{"run", "step", "keys"}`` per step to
``WORK/log-<run>-<rank>.jsonl``. A lost host stalls the others' all-reduce: the process group's
timeout (20 s) ends them, so the job fails instead of hanging.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from stoker import Loader
from stoker.distributed import LoaderCheckpoint
from stoker.loader import Sampling
from stoker.storage import S3Storage


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("endpoint")
    parser.add_argument("cache")
    parser.add_argument("--checkpoint-every", type=int, default=4)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    rank = dist.get_rank()
    options = {"endpoint": args.endpoint, "access_key_id": "stoker-test", "secret_access_key": "stoker-secret", "region": "us-east-1"}
    storage = S3Storage("s3://hosts/d", cache_dir=args.cache, cache_bytes=64 << 20, **options)
    loader = Loader(storage, batch_size=8, sampling=Sampling(shuffle="uniform", seed=11))  # rank and world size from the group
    latest = args.work / "latest"
    run = len(list(args.work.glob("started-*")))
    dist.barrier()
    if rank == 0:
        (args.work / f"started-{run}").touch()
    step = 0
    if latest.exists():
        state = {"loader": LoaderCheckpoint(loader), "step": torch.tensor(0)}
        dcp.load(state, checkpoint_id=str(args.work / latest.read_text()))
        step = int(state["step"])
    with open(args.work / f"log-{run}-{rank}.jsonl", "a") as log:
        for batch in loader:
            step += 1
            keys = [key for key, padding in zip(batch.keys, batch.padding) if not padding]
            log.write(json.dumps({"run": run, "step": step, "keys": keys}) + "\n")
            log.flush()
            dist.all_reduce(torch.ones(1))  # every rank takes part in every step, as DDP's sync does
            time.sleep(args.step_seconds)  # the rest of the training step
            if step % args.checkpoint_every == 0:
                dcp.save({"loader": LoaderCheckpoint(loader), "step": torch.tensor(step)}, checkpoint_id=str(args.work / f"step-{step}"))
                dist.barrier()
                if rank == 0:
                    (args.work / "latest.tmp").write_text(f"step-{step}")
                    os.replace(args.work / "latest.tmp", latest)
                dist.barrier()
    dist.barrier()
    if rank == 0:
        (args.work / f"finished-{run}").write_text(str(step))
    storage.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
