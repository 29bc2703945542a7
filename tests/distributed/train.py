"""A small CPU (gloo) training loop for `torchrun`, as a user would write one with stoker: the
Loader finds its rank from the process group, an all-reduce per step stands in for DDP's
gradient sync (a rank with one step more or less would hang it), and the loader's place is saved
with `torch.distributed.checkpoint` every few steps.

    torchrun --standalone --nproc-per-node=3 tests/distributed/train.py WORK [--die-at STEP]

It reads 601 samples from memory, or with ``--s3 ENDPOINT --cache FOLDER`` the test store's
``s3://hosts/d`` through a node cache (tests/hosts/test_torchrun_hosts.py runs it so on hosts
made of network namespaces, WORK on a folder every host sees, as a shared file system would be).
Each rank appends ``{"run", "step", "keys"}`` per step to ``WORK/log-<run>-<rank>.jsonl`` (padding
left out), so the test can check that, counting what each run delivered up to its last
checkpoint, every sample was delivered exactly once. A run that resumed writes the step it
resumed from to ``WORK/step-of-run-<run>``. A lost rank stalls the others' all-reduce until
the process group's timeout (``--timeout``) ends them, and torchrun may restart them as a new run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from stoker import Loader
from stoker.distributed import LoaderCheckpoint
from stoker.loader import Sampling
from stoker.storage import MemoryStorage, S3Storage, Storage

SAMPLES = 601  # not a multiple of any world size or batch: the ranks' shares are uneven


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--die-at", type=int, default=0, help="rank 1 kills itself (SIGKILL) after this step")
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--s3", metavar="ENDPOINT", help="read s3://hosts/d from this endpoint instead of memory")
    parser.add_argument("--cache", help="with --s3: the node cache's folder")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="the rest of each training step")
    parser.add_argument("--timeout", type=float, default=600.0, help="the process group's timeout (seconds)")
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    storage: Storage
    if args.s3:
        credentials = {"access_key_id": "stoker-test", "secret_access_key": "stoker-secret", "region": "us-east-1"}
        storage = S3Storage("s3://hosts/d", endpoint=args.s3, cache_dir=args.cache, cache_bytes=64 << 20, **credentials)
    else:
        storage = MemoryStorage({f"s{index:04d}": index.to_bytes(4, "little") for index in range(SAMPLES)})
    loader = Loader(storage, batch_size=8, sampling=Sampling(shuffle="uniform", seed=11))  # rank and world size from the group
    assert (loader.sampler.rank, loader.sampler.world_size) == (rank, dist.get_world_size())
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
        if rank == 0:
            (args.work / f"step-of-run-{run}").write_text(str(step))
    with open(args.work / f"log-{run}-{rank}.jsonl", "a") as log:
        for batch in loader:
            step += 1
            keys = [key for key, padding in zip(batch.keys, batch.padding) if not padding]
            log.write(json.dumps({"run": run, "step": step, "keys": keys}) + "\n")
            log.flush()
            dist.all_reduce(torch.ones(1))  # every rank takes part in every step, as DDP's sync does
            time.sleep(args.step_seconds)
            if step % args.checkpoint_every == 0:
                dcp.save({"loader": LoaderCheckpoint(loader), "step": torch.tensor(step)}, checkpoint_id=str(args.work / f"step-{step}"))
                dist.barrier()
                if rank == 0:
                    (args.work / "latest.tmp").write_text(f"step-{step}")
                    os.replace(args.work / "latest.tmp", latest)
                dist.barrier()
            if rank == 1 and step == args.die_at:
                os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    if rank == 0:
        (args.work / f"finished-{run}").write_text(str(step))
    storage.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
