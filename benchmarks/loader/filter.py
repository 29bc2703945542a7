"""A filter over an index of ten million samples (``Sampling(where=...)``), side by side with Hugging
Face datasets' ``Dataset.filter`` (batched, its recommended form) over the same columns: the
seconds and the memory the filter costs once per epoch, and what a read costs after it.

The storage is a synthetic one of N samples carrying two metadata columns (``aesthetic``, a
float, and ``width``, an integer), read whole as Parquet or Lance columns are; the filter is
``aesthetic >= 5.5 and width >= 512`` (about a quarter kept). Each side runs in a child process
of its own, and its peak memory is measured from just before the filter (Linux): stoker builds a Loader with the filter and takes its
first batch; datasets builds its table from the same arrays and filters it (its indices mapping
kept in memory, ``keep_in_memory=True``, as the fairest form: no cache file written). The read
cost is the time to look up 100,000 kept samples through each one's index mapping, per sample.
stoker's side also gives the cost of an epoch that begins under a filter schedule's next point
(``aesthetic >= 7``, `Loader.set_filter_schedule`): worked out again, once, at the epoch's start.

Run:  python benchmarks/loader/filter.py [--samples 1e7] [--peers stoker,datasets]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from stoker_testbed.children import run_sides
from stoker_testbed.memory import peak_mib, resident_mib

EXPRESSION = "aesthetic >= 5.5 and width >= 512"
SCHEDULED = "aesthetic >= 7"  # the next point of a filter schedule
LOOKUPS = 100_000


def columns(samples: int) -> dict[str, np.ndarray]:
    generator = np.random.default_rng(0)
    return {"aesthetic": generator.uniform(0, 10, samples), "width": generator.integers(100, 1000, samples)}


def run_stoker(samples: int) -> dict[str, Any]:
    from stoker import Loader, Sampling
    from stoker_testbed.data.synthetic import SyntheticStorage, free_decode

    class WithColumns(SyntheticStorage):
        """Synthetic samples with metadata columns, read whole (as `ParquetStorage.read_values`)."""

        def __init__(self, size: int) -> None:
            super().__init__(size)
            self._columns = columns(size)

        def read_values(self, name: str) -> np.ndarray:
            return self._columns[name]

    storage = WithColumns(samples)
    before = resident_mib()
    started = time.perf_counter()
    loader = Loader(storage, batch_size=256, decode=free_decode, sampling=Sampling(where=EXPRESSION))
    filtered = time.perf_counter() - started
    next(iter(loader))
    first_batch = time.perf_counter() - started
    view = loader.storage
    wanted = np.random.default_rng(1).integers(0, len(view), LOOKUPS)
    started = time.perf_counter()
    view.keys.take(wanted.tolist())  # type: ignore[attr-defined]
    lookup = (time.perf_counter() - started) / LOOKUPS
    memory = peak_mib() - before  # the filter's, before the schedule below adds its own
    # A filter on a schedule (`set_filter_schedule`): the cost of an epoch that begins under a new point.
    loader.set_filter_schedule({0: EXPRESSION, 1: SCHEDULED})
    started = time.perf_counter()
    loader.set_epoch(1)  # begins at step 1: the point at step 1 is in force
    switch = time.perf_counter() - started
    return {
        "kept": len(view),
        "seconds": filtered,
        "first_batch": first_batch,
        "mib": memory,
        "lookup_ns": lookup * 1e9,
        "switch": switch,
    }


def run_datasets(samples: int) -> dict[str, Any]:
    import datasets

    datasets.disable_progress_bars()
    made = columns(samples)
    table = datasets.Dataset.from_dict({"key": np.arange(samples), **made})
    before = resident_mib()
    started = time.perf_counter()
    kept = table.filter(
        lambda batch: (np.asarray(batch["aesthetic"]) >= 5.5) & (np.asarray(batch["width"]) >= 512),
        batched=True,
        batch_size=100_000,
        keep_in_memory=True,
    )
    filtered = time.perf_counter() - started
    wanted = np.random.default_rng(1).integers(0, len(kept), LOOKUPS)
    started = time.perf_counter()
    kept.select_columns(["key"])[wanted.tolist()]
    lookup = (time.perf_counter() - started) / LOOKUPS
    return {"kept": len(kept), "seconds": filtered, "first_batch": None, "mib": peak_mib() - before, "lookup_ns": lookup * 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=float, default=1e7)
    parser.add_argument("--peers", default="stoker,datasets")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    samples = int(arguments.samples)
    if arguments.child:
        print(json.dumps((run_stoker if arguments.child == "stoker" else run_datasets)(samples)))
        return
    results = run_sides(__file__, arguments.peers.split(","), ["--samples", str(samples)])
    print(f"filter {EXPRESSION!r} over {samples:,} samples")
    print("| loader | kept | filter s | first batch s | peak memory added MiB | lookup ns/sample |")
    print("|---|---|---|---|---|---|")
    for peer, result in results.items():
        first = f"{result['first_batch']:.2f}" if result["first_batch"] is not None else "n/a"
        print(f"| {peer} | {result['kept']:,} | {result['seconds']:.2f} | {first} | {result['mib']:.0f} | {result['lookup_ns']:.0f} |")
    if "stoker" in results:
        print(f"an epoch beginning under a filter schedule's next point ({SCHEDULED!r}): {results['stoker']['switch']:.2f} s, once")
    if {"stoker", "datasets"} <= results.keys():
        ratio = results["datasets"]["seconds"] / results["stoker"]["seconds"]
        print(f"stoker's filter is {ratio:.1f}x as fast as datasets' (seconds, one process run)")


if __name__ == "__main__":
    main()
