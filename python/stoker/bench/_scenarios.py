"""The papers' experiments as `stoker bench --scenario NAME`, each printing its table.

- ``small-files``: random small files vs sequential shards with a cold page cache (Data Journey
  sections 2-3).
- ``starvation``: decode workers vs CPU starvation, with and without a training process using a
  core (Data Journey section 4).
- ``padding``: the padding tax: naive padding vs packing (Data Journey section 5).
- ``pinned``: pinned vs pageable host-to-device copies (Data Journey section 6; needs CUDA).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .._bounded import walk_files

__all__ = ["SCENARIOS", "alpaca_like_lengths", "drop_caches", "naive_efficiency", "packed_efficiency"]

CONTEXT, BATCH = 4096, 32


def alpaca_like_lengths(count: int, seed: int = 0) -> np.ndarray:
    """Lengths matching the paper's Alpaca statistics: median 83, mean 95, within [13, 307]."""
    generator = np.random.default_rng(seed)
    sigma = np.sqrt(2 * np.log(95 / 83))  # mean / median = exp(sigma^2 / 2)
    return np.clip(np.round(generator.lognormal(np.log(83), sigma, count)), 13, 307).astype(np.int64)


def long_lengths(count: int, seed: int = 0) -> np.ndarray:
    """Long documents: median 1,500 tokens, about 10% longer than a 4,096 context."""
    generator = np.random.default_rng(seed)
    return np.clip(np.round(generator.lognormal(np.log(1500), 1.0, count)), 1, 40_000).astype(np.int64)


def naive_efficiency(lengths: np.ndarray, context: int = CONTEXT) -> float:
    """One document per row, padded (and truncated) to the context."""
    return float(np.minimum(lengths, context).sum() / (len(lengths) * context))


def packed_efficiency(lengths: np.ndarray, context: int = CONTEXT, batch: int = BATCH, **options: object) -> tuple[float, int]:
    """(efficiency, batches) of packing documents of these lengths."""
    from ..ops import SequencePacker

    packer = SequencePacker(context, batch, **options)  # type: ignore[arg-type]
    packer.add_many(np.zeros(int(lengths.sum()), dtype=np.uint32), lengths)
    batches = sum(1 for _ in packer.batches(final=True))
    return packer.report.efficiency, batches


def padding() -> str:
    lines = [f"The padding tax: context {CONTEXT}, batch {BATCH} (efficiency = real tokens / positions)"]
    for name, lengths in (("Alpaca-like", alpaca_like_lengths(2000)), ("long documents", long_lengths(2000))):
        naive = naive_efficiency(lengths)
        lines.append(
            f"\n{name}: {len(lengths)} documents, median {int(np.median(lengths))}, mean {lengths.mean():.0f}, max {lengths.max()}"
        )
        lines.append(f"  {'naive padding':<28} {100 * naive:6.1f}%")
        for label, strategy in (("greedy packing", "greedy"), ("best-fit packing", "best_fit")):
            efficiency, _ = packed_efficiency(lengths, strategy=strategy)
            lines.append(f"  {label:<28} {100 * efficiency:6.1f}%   {efficiency / naive:5.1f}x the useful work")
    return "\n".join(lines)


def drop_caches(paths: list[Path]) -> str:
    """Empty the page cache for ``paths``: as root ``sync; echo 3 > /proc/sys/vm/drop_caches``,
    else ``posix_fadvise(DONTNEED)`` on every file below them. Returns which was used."""
    return _drop_caches(paths)


def _drop_caches(paths: list[Path]) -> str:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as control:
            control.write("3\n")
        return "drop_caches"
    except OSError:
        for root in paths:
            for path in [root] if root.is_file() else walk_files(root):
                if path.is_file():
                    descriptor = os.open(path, os.O_RDONLY)
                    try:
                        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
                    finally:
                        os.close(descriptor)
        return "posix_fadvise(DONTNEED)"


def small_files() -> str:
    from ..ingest import convert_storage
    from ..storage import FileStorage, TarShardStorage, cache_dir
    from ._images import image_folder

    folder = image_folder(2000)
    shards = cache_dir("bench", "shards-2000")
    if not (shards / "dataset.json").exists():
        with FileStorage(folder) as source:
            convert_storage(source, shards, shard_size=64 << 20, progress=False)
    files, tar = FileStorage(folder), TarShardStorage(shards)
    order = list(range(len(files)))
    random.Random(0).shuffle(order)
    results = []
    how = ""

    def timed(label: str, run: Callable[[], int]) -> None:
        nonlocal how
        how = _drop_caches([folder, shards])
        started = time.perf_counter()
        total = run()
        seconds = time.perf_counter() - started
        results.append((label, total / seconds / 1e6, len(files) / seconds))

    def shuffled_files() -> int:
        with ThreadPoolExecutor(8) as pool:
            chunks = [order[start : start + 32] for start in range(0, len(order), 32)]
            return sum(len(data) for chunk in pool.map(files.read_indices, chunks) for data in chunk if data)

    timed("small files, shuffled (8 threads)", shuffled_files)
    timed("shards, sequential", lambda: sum(len(data) for _, data in tar.iter_sequential()))
    lines = [f"Random small files vs sequential shards, cold cache ({how}), {len(files)} JPEGs"]
    for label, megabytes, samples in results:
        lines.append(f"  {label:<36} {megabytes:8.1f} MB/s {samples:9.0f} samples/s")
    lines.append(f"  sequential shards / shuffled files: {results[1][2] / results[0][2]:.1f}x")
    return "\n".join(lines)


def _burn(stop: multiprocessing.synchronize.Event) -> None:
    value = 0
    while not stop.is_set():
        for number in range(100_000):
            value += number * number


def starvation() -> str:
    from ..storage import FileStorage
    from ._images import image_folder
    from ._run import run_loader

    storage = FileStorage(image_folder(1000))
    lines = [
        "Decode workers vs CPU starvation (a training process busy on one core, or not)",
        f"  {'workers':>7} {'alone':>12} {'with training':>14}",
    ]
    context = multiprocessing.get_context("forkserver")
    for workers in (1, 2, 4):
        alone = run_loader(storage, decode_concurrency=workers, duration=6, progress=False).images_per_second
        stop = context.Event()
        trainer = context.Process(target=_burn, args=(stop,), daemon=True)
        trainer.start()
        try:
            shared = run_loader(storage, decode_concurrency=workers, duration=6, progress=False).images_per_second
        finally:
            stop.set()
            trainer.join(5)
        lines.append(f"  {workers:>7} {alone:>9.0f}/s {shared:>11.0f}/s")
    lines.append(f"  ({os.cpu_count()} cores: workers beyond the free cores only add contention)")
    return "\n".join(lines)


def pinned() -> str:

    try:
        import torch
    except ImportError:
        return "Pinned vs pageable transfer: torch is not installed; nothing measured."
    if not torch.cuda.is_available():
        return "Pinned vs pageable transfer: no CUDA device on this machine; nothing measured (run it where a GPU is)."
    shape = (32, 3, 224, 224)
    lines = ["Pinned vs pageable host-to-device copies, 32 x 3 x 224 x 224 float32"]
    for label, host in (("pageable", torch.randn(shape)), ("pinned", torch.randn(shape).pin_memory())):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(50):
            host.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        lines.append(f"  {label:<9} {50 * host.numel() * 4 / 1e9 / (time.perf_counter() - started):6.1f} GB/s")
    return "\n".join(lines)


SCENARIOS: dict[str, Callable[[], str]] = {"small-files": small_files, "starvation": starvation, "padding": padding, "pinned": pinned}
