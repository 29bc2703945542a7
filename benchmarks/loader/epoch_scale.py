"""Epochs of millions to a billion samples, with decode made free so that only a loader's own work
is measured: samples/s in the first and the last tenth of the epoch, peak RSS, construction and
first batch, and a checkpoint's time and size at mid-epoch, side by side with torch's
``StatefulDataLoader`` + ``RandomSampler`` (torch's DataLoader with checkpoints; the sampler
holds ``torch.randperm(N)``) and Grain's ``MapDataset.range(N).shuffle()`` (an index shuffle
computed on the fly, Grain's recommended pipeline), each over the same N tiny samples made without I/O, batch 256, one
process, each loader in a child process of its own (RSS is its own).

Up to ``--full`` samples an epoch runs whole. Past it, the first tenth is measured from the
start and the last tenth from a state at 90% of the epoch (stoker's exact resume: the state a run
that got there would hold, one span), since a whole epoch of a billion would take hours; a peer
that cannot resume there is measured on its first tenth only, and says so.

Run:  python benchmarks/loader/epoch_scale.py [--sizes 1e6,1e7,1e8] [--full 1e8] [--loaders stoker,torch,grain]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BATCH = 256


def _digest_of_span(epoch: int, end: int) -> dict[str, int]:
    """The delivery digest a run holds once it delivered positions [0, end) of ``epoch`` (one
    rank), taken a million positions at a time (memory bounded at any epoch size)."""
    from stoker.loader.state import DeliveryDigest

    digest = DeliveryDigest(epoch)
    for start in range(0, end, 1 << 20):
        digest.add(np.arange(start, min(end, start + (1 << 20)), dtype=np.int64))
    return digest.state()


def _timed_windows(
    batches: Iterator[Any], size: int, first: int, last_from: int, stop: int, at_half: Callable[[], None], taken: int = 1
) -> dict[str, float]:
    """Samples/s over [0, first) and [last_from, stop) of the batches' samples (``size`` each;
    ``taken`` batches were taken before, the first-batch time). The epoch's last batch (a short
    one, and its end) is never in a window: the windows measure steady batches."""
    seen, started, marks = taken * size, time.perf_counter(), {}
    half_done = False
    for _ in batches:
        seen += size
        now = time.perf_counter()
        if "first" not in marks and seen >= first:
            marks["first"] = (seen - taken * size) / (now - started)
        if "last_start" not in marks and seen >= last_from:
            marks["last_start"], marks["last_seen"] = now, seen
        if not half_done and seen >= stop // 2:
            half_done = True
            at_half()
        if seen >= stop:
            if "last_start" in marks and seen > marks["last_seen"]:
                marks["last"] = (seen - marks["last_seen"]) / (now - marks["last_start"])
            break
    return marks


def _started(make: Callable[[], Any]) -> tuple[Any, Iterator[Any], float, float]:
    """(loader, its batches with the first taken, construction seconds, first-batch seconds)."""
    started = time.perf_counter()
    loader = make()
    construction = time.perf_counter() - started
    batches = iter(loader)
    next(batches)
    return loader, batches, construction, time.perf_counter() - started


def _stoker(size: int, full: int) -> dict[str, Any]:
    from stoker import Loader
    from stoker_testbed.data.synthetic import SyntheticStorage, free_decode

    loader, batches, construction, first_batch = _started(lambda: Loader(SyntheticStorage(size), batch_size=BATCH, decode=free_decode))
    checkpoint: dict[str, float] = {}

    def save() -> None:
        times = []
        for _ in range(5):
            begun = time.perf_counter()
            state = loader.state_dict()
            times.append(time.perf_counter() - begun)
        checkpoint.update(seconds=statistics.median(times), bytes=len(json.dumps(state)), record_ranges=loader.sampler.record_size)

    tenth = size // 10
    if size <= full:
        marks = _timed_windows(batches, BATCH, tenth, size - tenth, size - BATCH, save)
    else:
        marks = _timed_windows(batches, BATCH, tenth, tenth, tenth, save)
        state = loader.state_dict()
        state["sampler"]["delivered"] = [[0, size - tenth]]  # what a run at 90% holds: one span
        state["delivered_digest"] = _digest_of_span(state["sampler"]["epoch"], size - tenth)  # and its proof
        resumed = Loader(SyntheticStorage(size), batch_size=BATCH, decode=free_decode)
        resumed.load_state_dict(state)
        tail = _timed_windows(iter(resumed), BATCH, tenth - BATCH, tenth - BATCH, tenth - BATCH, lambda: None, taken=0)
        marks["last"] = tail.get("first", float("nan"))
    return {"construction": construction, "first_batch": first_batch, **marks, **checkpoint}


def _torch(size: int, full: int) -> dict[str, Any]:
    import torch
    from torch.utils.data import Dataset, RandomSampler
    from torchdata.stateful_dataloader import StatefulDataLoader

    class Synthetic(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return size

        def __getitem__(self, index: int) -> int:
            int(index).to_bytes(8, "little")  # the same "read" as stoker's storage
            return 0

    dataset = Synthetic()
    loader, batches, construction, first_batch = _started(
        lambda: StatefulDataLoader(dataset, batch_size=BATCH, sampler=RandomSampler(dataset, generator=torch.Generator().manual_seed(0)))
    )
    checkpoint: dict[str, float] = {}

    def save() -> None:
        begun = time.perf_counter()
        state = loader.state_dict()
        checkpoint.update(seconds=time.perf_counter() - begun, bytes=len(str(state)))

    tenth = size // 10
    stop = size - BATCH if size <= full else tenth
    marks = _timed_windows(batches, BATCH, tenth, size - tenth if size <= full else tenth, stop, save)
    return {"construction": construction, "first_batch": first_batch, **marks, **checkpoint}


def _grain(size: int, full: int) -> dict[str, Any]:
    import grain

    def free(index: int) -> int:
        int(index).to_bytes(8, "little")  # the same "read" as stoker's storage
        return 0

    # Grain's own recommended pipeline: a MapDataset whose shuffle is an index shuffle computed
    # position by position (no permutation stored), then an iterator with get_state().
    dataset = grain.MapDataset.range(size).shuffle(seed=0).map(free).batch(BATCH)
    _, batches, construction, first_batch = _started(dataset.to_iter_dataset)
    checkpoint: dict[str, float] = {}

    def save() -> None:
        begun = time.perf_counter()
        state = batches.get_state()  # type: ignore[attr-defined]
        checkpoint.update(seconds=time.perf_counter() - begun, bytes=len(json.dumps(state)))

    tenth = size // 10
    if size <= full:
        marks = _timed_windows(batches, BATCH, tenth, size - tenth, size - BATCH, save)
    else:  # Grain resumes too: its state is the next batch's number
        marks = _timed_windows(batches, BATCH, tenth, tenth, tenth, save)
        resumed = iter(dataset.to_iter_dataset())
        resumed.set_state({"next_index": (size - tenth) // BATCH})  # type: ignore[attr-defined]
        marks["last"] = _timed_windows(resumed, BATCH, tenth - BATCH, tenth - BATCH, tenth - BATCH, lambda: None, taken=0)["first"]
    return {"construction": construction, "first_batch": first_batch, **marks, **checkpoint}


LOADERS = {"stoker": _stoker, "torch": _torch, "grain": _grain}


def child(name: str, size: int, full: int) -> None:
    result = LOADERS[name](size, full)
    result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def run(name: str, size: int, full: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, str(size), str(full)], capture_output=True, text=True, cwd=ROOT, timeout=24 * 3600
    )
    if done.returncode < 0:  # the kernel's OOM killer sends SIGKILL
        return {"error": f"killed by signal {-done.returncode} (SIGKILL: out of memory, on this machine's {_memory_gb():.0f} GB)"}
    if done.returncode != 0:
        errors = [line for line in done.stderr.strip().splitlines() if "Error" in line or "error" in line]
        return {"error": (errors or ["no output"])[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _memory_gb() -> float:
    with open("/proc/meminfo") as meminfo:
        return int(meminfo.readline().split()[1]) / 2**20


def _number(text: str) -> int:
    return int(float(text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1e6,1e7,1e8", help="epoch sizes, comma-separated")
    parser.add_argument("--full", type=_number, default=10**8, help="largest epoch run whole (past it: from a state at 90%%)")
    parser.add_argument("--loaders", default="stoker,torch,grain")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return
    print(
        "| N | loader | first tenth (samples/s) | last tenth | last/first | peak RSS | construction | first batch | checkpoint | state size |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size in (_number(text) for text in args.sizes.split(",")):
        for name in args.loaders.split(","):
            result = run(name, size, args.full)
            if "error" in result:
                print(f"| {size:.0e} | {name} | left out: {result['error']} | | | | | | | |", flush=True)
                continue
            first, last = result.get("first", float("nan")), result.get("last")
            tail = f"{last:,.0f}" if last else "not measured (no resume at 90%)"
            ratio = f"{last / first:.2f}" if last else "-"
            print(
                f"| {size:.0e} | {name} | {first:,.0f} | {tail} | {ratio} | {result['rss_mb']:,.0f} MB | {result['construction']:.3f} s | "
                f"{result['first_batch']:.3f} s | {result.get('seconds', float('nan')) * 1e3:.2f} ms | {result.get('bytes', 0):,} B |",
                flush=True,
            )


if __name__ == "__main__":
    main()
