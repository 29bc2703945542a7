"""Resuming an epoch of ten million samples after the dataset changed (`load_state_dict(keys_before=...)`):
what the key list costs to write and keep, what the resume by key costs once (seconds and
memory), the state's size after it, and what a read costs in the continued epoch, side by side
with a plain resume over the same (changed) dataset, saved over it, in the same process run.

No peer resumes by key after a change (torch's, Grain's, Streaming's and LitData's states are
positions or sample counts over an unchanged dataset; the workaround is to start the epoch over),
so the comparison is stoker's own: the plain resume is the baseline.

The dataset is a synthetic one (keys ``sample-<i>``, no I/O, decode free); the change removes 0.1%
of the samples (half of them delivered already) and adds 0.1%; the state is the one a run at
half the epoch holds (one span, as `epoch_scale.py` builds it). Each side runs in a child process
of its own, its peak memory measured from just before the resume (Linux).

Run:  python benchmarks/loader/dataset_change.py [--samples 1e7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from stoker_testbed.memory import peak_mib, resident_mib

BATCH = 256
WINDOWS, WINDOW_BATCHES = 5, 200  # the read rate is the median of windows: the machines are shared


def _storages(samples: int, changed: bool) -> Any:
    from stoker.storage import FilteredStorage
    from stoker_testbed.data.synthetic import SyntheticStorage

    if not changed:
        return SyntheticStorage(samples)
    added = samples // 1000
    removed = np.random.default_rng(3).choice(samples, samples // 1000, replace=False)
    kept = np.setdiff1d(np.arange(samples + added, dtype=np.int64), removed)
    return FilteredStorage(SyntheticStorage(samples + added), kept, "0.1% removed, 0.1% added")


def run(samples: int, side: str, directory: str) -> dict[str, Any]:
    from stoker import Loader, Sampling
    from stoker_testbed.data.synthetic import SyntheticStorage, free_decode

    def loader(storage: Any) -> Loader:
        return Loader(storage, batch_size=BATCH, decode=free_decode, sampling=Sampling(seed=1))

    # By key: the state was saved over the dataset before the change. Plain: over the changed one.
    saved = loader(SyntheticStorage(samples) if side == "by key" else _storages(samples, changed=True))
    started = time.perf_counter()
    key_list = Path(saved.save_keys(directory))
    write_seconds = time.perf_counter() - started
    state = saved.state_dict()
    state["sampler"]["delivered"] = [[0, samples // 2]]  # what a run at half the epoch holds: one span
    # The proof of what it delivered, for that span (a state is refused without it).
    from stoker.loader.state import DeliveryDigest

    digest = DeliveryDigest(epoch=state["delivered_digest"]["epoch"])
    digest.add(np.arange(samples // 2))
    state["delivered_digest"] = digest.state()
    resumed = loader(_storages(samples, changed=True))
    before = resident_mib()
    started = time.perf_counter()
    resumed.load_state_dict(state, keys_before=directory if side == "by key" else None)
    resume_seconds = time.perf_counter() - started
    memory = peak_mib() - before
    batches = iter(resumed)
    next(batches)
    window = max(1, min(WINDOW_BATCHES, (resumed.batches_left - 2) // WINDOWS))  # small epochs: shorter windows
    rates = []
    for _ in range(WINDOWS):
        started = time.perf_counter()
        for _ in range(window):
            next(batches)
        rates.append(window * BATCH / (time.perf_counter() - started))
    rate = statistics.median(rates)
    return {
        "key_list_seconds": write_seconds,
        "key_list_mib": key_list.stat().st_size / (1 << 20),
        "resume_seconds": resume_seconds,
        "resume_mib": memory,
        "state_bytes": len(json.dumps(resumed.state_dict())),
        "samples_per_second": rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=float, default=1e7)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    samples = int(arguments.samples)
    if arguments.child:
        print(json.dumps(run(samples, arguments.child, arguments.directory)))
        return
    results = {}
    for side in ("plain", "by key"):
        with tempfile.TemporaryDirectory() as directory:
            command = [sys.executable, __file__, "--samples", str(samples), "--child", side, "--directory", directory]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            results[side] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"resume at half of an epoch of {samples:,} samples; the changed dataset lost 0.1% and gained 0.1%")
    print("| resume | resume s | resume peak MiB | state bytes after | samples/s after |")
    print("|---|---|---|---|---|")
    for side, result in results.items():
        print(
            f"| {side} | {result['resume_seconds']:.2f} | {result['resume_mib']:.0f} | {result['state_bytes']:,} | {result['samples_per_second']:,.0f} |"
        )
    keys = results["by key"]
    print(f"key list: written in {keys['key_list_seconds']:.2f} s, {keys['key_list_mib']:.0f} MiB on disk (once per dataset)")
    print(
        f"reads in the continued epoch run at {keys['samples_per_second'] / results['plain']['samples_per_second']:.2f}x a plain resume's rate"
    )


if __name__ == "__main__":
    main()
