"""Reading samples with a cold page cache: small files vs tar shards vs LMDB, one run.

Data (made once, cached in ~/.cache/stoker/storage-bench): `--small` samples of 4-16 KB and
`--large` samples of 100 KB, as an ImageFolder tree, as indexed tar shards (256 MB) and as an
LMDB (Caffe Datums). Before each measurement the page cache is dropped: as root with
`sync; echo 3 > /proc/sys/vm/drop_caches`, otherwise with posix_fadvise(DONTNEED) on every file of
the dataset (the table says which).

Methods, all reading the same `--reads` samples (the whole set for sequential ones):
  dd                      `dd bs=4M` of the shards: the disk's sequential ceiling
  shards sequential       TarShardStorage.iter_sequential
  small files shuffled    FileStorage, one file per sample, `--threads` readers
  shards shuffled         TarShardStorage.read_many, uniform shuffle, coalesced, `--threads` readers
                          (CRC-32 of every sample verified, the default)
  shards shuffled, no CRC the same with verify=False: what integrity costs (target: under 3%)
  LMDB py-lmdb shuffled   plain py-lmdb gets (mmap), `--threads` readers
  LMDB explicit shuffled  offset index + pread, coalesced, `--threads` readers
  shards block order      the block shuffle's order (8 MB blocks, a window of 32), per-sample
                          reads as above, then block streaming (`stream_blocks`: one read per
                          block, samples from memory): what whole-block reads add on a cold disk
Targets (local storage issue): sequential shards >= 90% of dd; shuffled shards >= 5x shuffled
small files; LMDB explicit >= 1.5x py-lmdb at the same thread count.

Run:  python benchmarks/storage/storage_cold.py [--small 50000] [--large 10000] [--reads 20000] [--threads 8]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stoker.bench import drop_caches, require_optimized_core
from stoker.ingest import convert_storage
from stoker.sampling import Sampler
from stoker.storage import FileStorage, LmdbStorage, Storage, TarShardStorage, cache_dir


def make_folder(root: Path, small: int, large: int, seed: int = 0) -> None:
    """The ImageFolder tree: 100 classes, payloads of random bytes (storage does not decode)."""
    marker = root / ".complete"
    if marker.exists():
        return
    generator = random.Random(seed)
    print(f"writing {small} + {large} sample files to {root} ...", flush=True)
    for index in range(small + large):
        folder = root / f"class_{index % 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        size = generator.randint(4096, 16384) if index < small else 100 * 1024
        (folder / f"{index:08d}.jpg").write_bytes(os.urandom(size))
    marker.write_text("")


def dataset(small: int, large: int) -> tuple[Path, Path, Path]:
    base = cache_dir("storage-bench", f"{small}-{large}")
    folder, shards, database = base / "folder", base / "shards", base / "train.lmdb"
    make_folder(folder, small, large)
    if not (shards / "dataset.json").exists():
        with FileStorage(folder) as source:
            convert_storage(source, shards, shard_size=256 << 20)
    if not database.exists():
        with FileStorage(folder) as source:
            convert_storage(source, database, to="lmdb")
    return folder, shards, database


def shuffled_reads(storage: Storage, keys: list[str], threads: int, batch: int) -> int:
    """Read ``keys`` in batches on ``threads`` threads; returns bytes read."""
    batches = [keys[start : start + batch] for start in range(0, len(keys), batch)]
    with ThreadPoolExecutor(threads) as pool:
        return sum(sum(len(data) for data in result) for result in pool.map(storage.read_many, batches))  # type: ignore[misc]


def plain_lmdb_reads(database: Path, keys: list[str], threads: int, batch: int) -> int:
    """py-lmdb reads through a map opened for this measurement only: pages mapped into a live
    process survive drop_caches, so a map kept open would make every later read warm."""
    with LmdbStorage(database, mode="lmdb") as plain:
        return shuffled_reads(plain, keys, threads, batch)


def block_streamed_reads(shards: Path, keys: list[str], threads: int, batch: int) -> int:
    """``keys`` read with block streaming, from a storage opened for this measurement only (the
    blocks it holds would make a later measurement warm)."""
    with TarShardStorage(shards) as storage:
        storage.stream_blocks()
        return shuffled_reads(storage, keys, threads, batch)


def measure(name: str, run: Callable[[], int], samples: int, paths: Sequence[Path], table: dict) -> None:
    how = drop_caches(paths)
    started = time.perf_counter()
    total = run()
    seconds = time.perf_counter() - started
    table.setdefault(name, []).append((total / seconds / 1e6, samples / seconds, how))
    print(f"  {name:<26} {total / seconds / 1e6:>8.1f} MB/s {samples / seconds:>10.0f} samples/s", flush=True)


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=50_000)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--reads", type=int, default=20_000, help="samples per shuffled measurement")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--batch", type=int, default=256, help="keys per read_many call")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the table shows medians")
    args = parser.parse_args()

    folder, shards, database = dataset(args.small, args.large)
    files = FileStorage(folder)
    tar = TarShardStorage(shards)
    unverified = TarShardStorage(shards, verify=False)
    explicit = LmdbStorage(database)
    everything = [folder, shards, database]
    wanted = random.Random(1).sample(list(files.keys), min(args.reads, len(files)))
    tar_keys = {key: tar.keys[files.index_of(key)] for key in wanted}  # the same samples in the shards
    table: dict[str, list] = {}
    print(f"cold reads, {args.threads} threads for shuffled methods, {len(wanted)} shuffled samples")
    shard_files = sorted(shards.glob("*.tar"))
    total_bytes = sum(path.stat().st_size for path in shard_files)

    def dd() -> int:
        for path in shard_files:
            subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=4M"], check=True, capture_output=True)
        return total_bytes

    order = Sampler(len(tar), shuffle=True, seed=1, blocks=tar.block_sizes(), window=32).order()[: len(wanted)]
    block_keys = [tar.keys[index] for index in order]

    for round_number in range(args.rounds):
        print(f"round {round_number + 1} of {args.rounds}")
        measure("dd sequential", dd, len(tar), everything, table)
        measure("shards sequential", lambda: sum(len(data) for _, data in tar.iter_sequential()), len(tar), everything, table)
        measure("small files shuffled", lambda: shuffled_reads(files, wanted, args.threads, args.batch), len(wanted), everything, table)
        measure(
            "shards shuffled",
            lambda: shuffled_reads(tar, [tar_keys[key] for key in wanted], args.threads, args.batch),
            len(wanted),
            everything,
            table,
        )
        measure(
            "shards shuffled, no CRC",
            lambda: shuffled_reads(unverified, [tar_keys[key] for key in wanted], args.threads, args.batch),
            len(wanted),
            everything,
            table,
        )
        measure(
            "LMDB py-lmdb shuffled", lambda: plain_lmdb_reads(database, wanted, args.threads, args.batch), len(wanted), everything, table
        )
        measure(
            "LMDB explicit shuffled", lambda: shuffled_reads(explicit, wanted, args.threads, args.batch), len(wanted), everything, table
        )
        measure("shards block order", lambda: shuffled_reads(tar, block_keys, args.threads, args.batch), len(wanted), everything, table)
        measure(
            "shards block streaming",
            lambda: block_streamed_reads(shards, block_keys, args.threads, args.batch),
            len(wanted),
            everything,
            table,
        )

    rates = {name: (statistics.median(row[0] for row in rows), statistics.median(row[1] for row in rows)) for name, rows in table.items()}
    print(f"\ncache dropped with: {next(iter(table.values()))[0][2]}; medians of {args.rounds} rounds")
    print(f"{'method':<26} {'MB/s':>8} {'samples/s':>10}")
    for name, (mb, samples) in rates.items():
        print(f"{name:<26} {mb:>8.1f} {samples:>10.0f}")
    print(f"\nsequential shards / dd:                 {rates['shards sequential'][0] / rates['dd sequential'][0]:.2f}  (target >= 0.90)")
    print(f"shuffled shards / shuffled small files:  {rates['shards shuffled'][1] / rates['small files shuffled'][1]:.2f}x (target >= 5x)")
    print(
        f"LMDB explicit / py-lmdb, shuffled:       {rates['LMDB explicit shuffled'][1] / rates['LMDB py-lmdb shuffled'][1]:.2f}x (target >= 1.5x)"
    )
    print(
        f"shards shuffled, CRC verified / not:     {rates['shards shuffled'][1] / rates['shards shuffled, no CRC'][1]:.3f} (target >= 0.97)"
    )
    print(f"block streaming / uniform shuffled shards: {rates['shards block streaming'][1] / rates['shards shuffled'][1]:.2f}x")
    print(f"block streaming / block order per sample:  {rates['shards block streaming'][1] / rates['shards block order'][1]:.2f}x")
    for storage in (files, tar, unverified, explicit):
        storage.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
