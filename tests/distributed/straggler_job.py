"""One rank of a synchronous job watched by `StragglerWatch`: an all-reduce per step stands in
for DDP's gradient sync, so a rank that waits for data holds the others back.

    RANK=r WORLD_SIZE=n MASTER_ADDR=a MASTER_PORT=p python tests/distributed/straggler_job.py OUT [options]

It reads ``--samples`` in-memory samples (``--read-delay``: seconds per sample on this rank),
or the test store's ``s3://hosts/d`` (``--s3 ENDPOINT``), or the folder ``--files``; its decode
spends CPU on each sample (``--decode-work``: rounds of zlib over it; ``--calibrate SHARE`` prints
the rounds that make a batch's decode take that share of a step on a free core, and exits). Rank 0 writes every
verdict the watch gave (null where no rank stood out) and every rank's last figures to
``OUT`` as JSON (tests/observe/test_straggler.py, tests/hosts/test_straggler_hosts.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.distributed as dist

from stoker import Loader
from stoker.observe import StragglerWatch
from stoker.storage import MemoryStorage, S3Storage, Storage


class SlowMemory(MemoryStorage):
    """Samples in memory whose reads take ``delay`` seconds each (a slow store, for one rank)."""

    def __init__(self, samples: dict[str, bytes], delay: float) -> None:
        super().__init__(samples)
        self.delay = delay

    def _read_indices(self, indices: Sequence[int]) -> list[bytes | Exception]:
        time.sleep(self.delay * len(indices))
        return super()._read_indices(indices)


def decode_rounds(data: bytes, rounds: int) -> int:
    """``rounds`` of zlib over ``data``: CPU work that holds the GIL, as a decode's Python does."""
    for _ in range(rounds):
        data = zlib.compress(data + data[:64], 6)
    return len(data)


def calibrate(folder: str, share: float, step_seconds: float, batch_size: int) -> int:
    """The rounds of `decode_rounds` that take ``share`` of ``step_seconds`` per batch here.

    The fastest of five timings is taken: a busy machine only makes a timing slower, and a
    slower timing would give too few rounds for the work to hold back a rank whose core is shared.
    """
    samples = sorted(path.read_bytes() for path in Path(folder).rglob("*") if path.is_file())[:32]
    rounds = 20
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for data in samples:
            decode_rounds(data, rounds)
        best = min(best, (time.perf_counter() - started) / len(samples) / rounds)
    return max(1, round(share * step_seconds / (best * batch_size)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--samples", type=int, default=480)
    parser.add_argument("--read-delay", type=float, default=0.0)
    parser.add_argument("--s3", metavar="ENDPOINT")
    parser.add_argument("--files", metavar="FOLDER")
    parser.add_argument("--decode-work", type=int, default=1)
    parser.add_argument("--calibrate", type=float, metavar="SHARE")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--step-seconds", type=float, default=0.01)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--stop-after", type=int, default=0, help="rank 1 leaves its loop and the job after this many steps")
    parser.add_argument("--no-sync", action="store_true", help="no all-reduce per step (ranks keep their own pace)")
    args = parser.parse_args()
    if args.calibrate is not None:
        print(calibrate(args.files, args.calibrate, args.step_seconds, args.batch_size))
        return
    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    storage: Storage
    if args.s3:
        credentials = {"access_key_id": "stoker-test", "secret_access_key": "stoker-secret", "region": "us-east-1"}
        storage = S3Storage("s3://hosts/d", endpoint=args.s3, **credentials)
    elif args.files:
        storage = Loader(args.files, batch_size=1).storage
    else:
        storage = SlowMemory({f"s{index:04d}": index.to_bytes(4, "little") * 256 for index in range(args.samples)}, args.read_delay)

    def decode(data: bytes) -> int:
        return decode_rounds(data, args.decode_work)

    loader = Loader(storage, batch_size=args.batch_size, decode=decode, drop_last=True)
    watch = StragglerWatch(loader, interval=args.interval, timeout=args.timeout)
    for _ in range(args.epochs):
        for step, _batch in enumerate(watch, 1):
            if not args.no_sync:
                dist.all_reduce(torch.ones(1))  # every rank waits for the slowest, as DDP's gradient sync does
            time.sleep(args.step_seconds)
            if rank == 1 and step == args.stop_after:
                storage.close()
                return  # gone: the others' next gathering finds no rank 1
    if rank == 0:
        figures = [json.loads(each.to_json()) for each in watch.figures]
        args.out.write_text(json.dumps({"verdicts": watch.verdicts, "figures": figures}))
    storage.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
