"""Tar shards at 10^6 to 10^8 members: what opening, the first batch, a checkpoint and the epoch
cost stoker when the dataset is as large as users' (decode made free, batch 256, one process).

The shards are real tar files made once under ``--data`` (sparse: each a file of a real shard's
size with real tar headers where an index is checked against its shard, 100,000 members a shard)
with real version 3 indexes, so what is measured is stoker's own work: reading index headers at
opening, index arrays as shards are first read (in the first window: a uniform shuffle touches
every shard at once), the per-batch lookups and reads. Each N runs in a child process of its own
(its peak RSS is its own). The last window is read from a state at 90% of the epoch (stoker's
exact resume, on the same storage), since a whole epoch of 10^8 would take an hour here.

No peer reads tar shards by index at this size: WebDataset streams shards (its shuffle is a
buffer), and its ``wids`` random access builds each shard's index by reading the whole tar at
opening. `benchmarks/loader/epoch_scale.py` compares the loaders' own bookkeeping with torch and Grain.

Run:  python benchmarks/storage/tar_index_scale.py [--sizes 1e6,1e7,1e8] [--window 200000] [--data /tmp/stoker-tar-scale]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BATCH = 256
PER_SHARD = 100_000


def _peak_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def _rate(batches: Any, samples: int) -> float:
    started, seen = time.perf_counter(), 0
    for batch in batches:
        seen += len(batch.keys)
        if seen >= samples:
            break
    return seen / (time.perf_counter() - started)


def child(folder: Path, window: int) -> dict[str, Any]:
    from stoker import Loader
    from stoker.storage import TarShardStorage
    from stoker_testbed.data.synthetic import free_decode

    started = time.perf_counter()
    storage = TarShardStorage(folder)
    opened = time.perf_counter() - started
    loader = Loader(storage, batch_size=BATCH, decode=free_decode)
    batches = iter(loader)
    next(batches)
    first_batch = time.perf_counter() - started
    first = _rate(batches, window)
    times = []
    for _ in range(5):
        begun = time.perf_counter()
        state = loader.state_dict()
        times.append(time.perf_counter() - begun)
    size = len(storage)
    state["sampler"]["delivered"] = [[0, size - size // 10]]  # what a run at 90% holds: one span
    # The proof of what it delivered, for that span (a state is refused without it).
    import numpy

    from stoker.loader.state import DeliveryDigest

    digest = DeliveryDigest(epoch=state["delivered_digest"]["epoch"])
    digest.add(numpy.arange(size - size // 10))
    state["delivered_digest"] = digest.state()
    loader.close()
    resumed = Loader(storage, batch_size=BATCH, decode=free_decode)  # the same storage: its index arrays read once
    resumed.load_state_dict(state)
    last = _rate(iter(resumed), window)
    return {
        "open": opened,
        "first_batch": first_batch,
        "first": first,
        "last": last,
        "checkpoint_ms": statistics.median(times) * 1e3,
        "state_bytes": len(json.dumps(state)),
        "rss_mb": _peak_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1e6,1e7,1e8", help="members, comma-separated")
    parser.add_argument("--window", type=lambda text: int(float(text)), default=200_000, help="samples timed at the start and at 90%%")
    parser.add_argument("--data", type=Path, default=Path("/tmp/stoker-tar-scale"), help="where the shards are made (once)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), int(args.child[1]))))
        return
    from stoker_testbed.data.synthetic_shards import make_sparse_shards

    print(
        "| N | shards | index files | made in | open | first batch | first window (samples/s) | at 90% | last/first | peak RSS | checkpoint | state |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size in (int(float(text)) for text in args.sizes.split(",")):
        folder = args.data / f"{size:.0e}"
        made = 0.0
        if not (folder / "dataset.json").exists():
            begun = time.perf_counter()
            make_sparse_shards(folder, size, PER_SHARD)
            made = time.perf_counter() - begun
        index_bytes = sum(path.stat().st_size for path in folder.glob("*.idx"))
        window = min(args.window, size // 10)
        done = subprocess.run([sys.executable, __file__, "--child", str(folder), str(window)], capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            print(f"| {size:.0e} | stoker failed: {(done.stderr.strip().splitlines() or ['no output'])[-1][:200]} |", flush=True)
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| {size:.0e} | {-(-size // PER_SHARD)} | {index_bytes / 2**20:,.0f} MB | {f'{made:.1f} s' if made else 'before'} | "
            f"{result['open']:.2f} s | {result['first_batch']:.2f} s | {result['first']:,.0f} | {result['last']:,.0f} | "
            f"{result['last'] / result['first']:.2f} | {result['rss_mb']:,.0f} MB | {result['checkpoint_ms']:.2f} ms | {result['state_bytes']:,} B |",
            flush=True,
        )


if __name__ == "__main__":
    main()
