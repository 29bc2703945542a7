"""What the provenance ledger costs: the Loader on the image path (JPEG folder, random-resized-crop
224 + flip, uint8 CHW, batches of 32) with and without `Loader.record_provenance`, in interleaved rounds of one
epoch each, the same fixed settings in both, and the ledger's bytes per step (as written, and compacted to Parquet with zstd),
projected to a million steps.

Run:  python benchmarks/loader/provenance.py [--images 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from stoker import Loader
from stoker.bench import image_folder, require_optimized_core
from stoker.loader import Throughput
from stoker.observe import read_ledger
from stoker.ops import ImageTransform

BATCH = 32
TRANSFORM = ImageTransform(random_resized_crop=224, flip_probability=0.5, layout="CHW")


def epoch(root: Path, ledger: Path | None) -> float:
    """Images/s of one epoch."""
    # Fixed settings in both arms: the live tuner's moves in one-epoch runs would blur the comparison.
    loader = Loader(root, batch_size=BATCH, transform=TRANSFORM, throughput=Throughput(autotune=False))
    if ledger is not None:
        loader.record_provenance(ledger)
    started = time.perf_counter()
    images = sum(len(batch.keys) for batch in loader)
    seconds = time.perf_counter() - started
    loader.close()
    return images / seconds


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    root = image_folder(args.images, 500, 375, progress=True)
    without, with_ledger = [], []
    with tempfile.TemporaryDirectory() as scratch:
        ledger = Path(scratch) / "ledger"
        epoch(root, None)  # warm the page cache
        for _ in range(args.rounds):
            without.append(epoch(root, None))
            with_ledger.append(epoch(root, ledger))
            print(f"  without {without[-1]:,.0f} img/s, with the ledger {with_ledger[-1]:,.0f} img/s", file=sys.stderr, flush=True)
        written = sum(path.stat().st_size for path in ledger.iterdir())
        table = read_ledger(ledger)
        steps = len(set(table.column("step").to_pylist())) * args.rounds
        import pyarrow.parquet

        compacted = Path(scratch) / "ledger.parquet"
        pyarrow.parquet.write_table(table, compacted, compression="zstd")
        parquet_bytes = compacted.stat().st_size
    ratio = statistics.median(with_ledger) / statistics.median(without)
    print(f"{args.images} JPEGs of 500x375, batches of {BATCH}, medians of {args.rounds} interleaved epochs")
    print("| Loader | images/s |")
    print("| --- | --- |")
    print(f"| without a ledger | {statistics.median(without):,.0f} |")
    print(f"| with `record_provenance` | {statistics.median(with_ledger):,.0f} ({ratio:.3f}x, cost {100 * (1 - ratio):.1f}%) |")
    per_step, per_step_parquet = written / steps, parquet_bytes / steps
    print(
        f"ledger: {table.num_rows:,} rows in {steps:,} steps; {per_step:,.0f} bytes a step as written "
        f"({per_step * 1e6 / 1e9:.1f} GB per million steps), {per_step_parquet:,.0f} compacted to Parquet+zstd "
        f"({per_step_parquet * 1e6 / 1e9:.2f} GB per million steps)"
    )


if __name__ == "__main__":
    main()
