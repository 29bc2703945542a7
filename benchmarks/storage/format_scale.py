"""A peer's format at a user's scale: MosaicML MDS shards of ``--samples`` tiny samples (8-byte
payloads, written by MosaicML's own ``MDSWriter``), read in place by stoker with decode made free
(``decode=bytes``), so that only the per-sample cost of the format's table and the Loader shows.

Reported: the first open (every shard scanned, the table saved) and a later one (the saved table
memory-mapped), the RSS each open adds, samples/s over the first and the last tenth of an epoch
(a cost per sample that grows over the epoch shows as a ratio below 1), the process's RSS before
the epoch and at its peak, and a mid-epoch
checkpoint's size and time (constant: no per-sample state).

Run:  python benchmarks/storage/format_scale.py [--samples 1e7] [--batch 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

from stoker import Loader
from stoker.bench import PeakMemory, require_optimized_core
from stoker.loader import Sampling
from stoker.storage import open_storage


def write(folder: Path, count: int) -> None:
    """``count`` samples of an 8-byte payload and an int label, by MosaicML's writer."""
    from streaming import MDSWriter

    with MDSWriter(out=str(folder), columns={"data": "bytes", "label": "int"}, size_limit=64 << 20, progress_bar=False) as writer:
        for index in range(count):
            writer.write({"data": index.to_bytes(8, "little"), "label": index % 1000})


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=lambda text: int(float(text)), default=10**7)
    parser.add_argument("--batch", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stoker-format-scale-") as scratch:
        os.environ["STOKER_CACHE"] = str(Path(scratch) / "cache")
        folder = Path(scratch) / "mds"
        started = time.perf_counter()
        write(folder, args.samples)
        print(f"{args.samples:,} samples written by MDSWriter in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        report: dict[str, float] = {"samples": args.samples}
        for name in ("first_open", "later_open"):
            before, started = rss_mb(), time.perf_counter()
            storage = open_storage(folder)
            report[f"{name}_seconds"] = time.perf_counter() - started
            report[f"{name}_rss_mb"] = rss_mb() - before
            if name == "first_open":
                storage.close()
        tenth = args.samples // 10
        loader = Loader(storage, batch_size=args.batch, decode=bytes, sampling=Sampling(seed=0))
        seen, marks, state_size, state_seconds = 0, {}, 0, 0.0
        before_epoch = rss_mb()
        with PeakMemory() as peak:
            started = time.perf_counter()
            for batch in loader:
                seen += len(batch.keys)
                now = time.perf_counter()
                if "first" not in marks and seen >= tenth:
                    marks["first"] = seen / (now - started)
                if "last_from" not in marks and seen >= args.samples - tenth:
                    marks["last_from"], marks["last_seen"] = now, seen
                if not state_size and seen >= args.samples // 2:
                    taken = time.perf_counter()
                    state_size = len(pickle.dumps(loader.state_dict()))
                    state_seconds = time.perf_counter() - taken
            ended = time.perf_counter()
        loader.close()
        storage.close()
        assert seen == args.samples, f"{seen} of {args.samples} delivered"
        report["first_tenth_per_s"] = marks["first"]
        report["last_tenth_per_s"] = (seen - marks["last_seen"]) / max(ended - marks["last_from"], 1e-9)
        report["last_over_first"] = report["last_tenth_per_s"] / report["first_tenth_per_s"]
        report["epoch_seconds"] = ended - started
        report["checkpoint_bytes"] = state_size
        report["checkpoint_ms"] = 1e3 * state_seconds
        report["rss_before_epoch_mb"] = before_epoch
        report["epoch_peak_rss_mb"] = peak.peak_bytes / 2**20
    print(json.dumps(report))
    print(
        f"\n{args.samples:,} MDS samples: first open {report['first_open_seconds']:.1f} s (+{report['first_open_rss_mb']:.0f} MB), "
        f"later open {report['later_open_seconds']:.2f} s (+{report['later_open_rss_mb']:.0f} MB); "
        f"{report['first_tenth_per_s']:,.0f} samples/s in the first tenth, {report['last_tenth_per_s']:,.0f} in the last "
        f"({report['last_over_first']:.2f}x); RSS {report['rss_before_epoch_mb']:.0f} MB before the epoch, {report['epoch_peak_rss_mb']:.0f} MB at its peak; checkpoint {report['checkpoint_bytes']} bytes in {report['checkpoint_ms']:.2f} ms"
    )


if __name__ == "__main__":
    main()
