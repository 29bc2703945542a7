"""Items/s through a 3-stage pipeline: stoker vs SPDL vs a bare ThreadPoolExecutor, one run.

Scenarios (the pipeline issue's targets in brackets):
  a. source -> trivial op -> trivial op -> sink: pure engine overhead      [stoker >= 3x SPDL]
  b. source -> 1 ms GIL-free op (concurrency 8) -> same -> aggregate(32) -> batch op
     b-cpu: the op hashes a buffer (hashlib releases the GIL): CPU-bound like image decode
     b-io:  the op sleeps 1 ms: latency-bound like a storage read     [stoker >= 0.9x bare pool]

The bare pool is the ceiling a pipeline cannot beat: a ThreadPoolExecutor with as many threads as
the pipelines get (16 in b) running both ops back to back per item, batches made in the calling
thread. Each engine runs each scenario `--repeats`
times interleaved (the machine is shared and noisy); the table shows the median.

Run:  python benchmarks/loader/pipeline_overhead.py [--items N] [--repeats R] [--json PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stoker.bench import require_optimized_core
from stoker.pipeline import PipelineBuilder

_PAYLOAD = os.urandom(1 << 20)


def _calibrate_hash_bytes(target_seconds: float = 0.001) -> int:
    """Bytes of sha256 that take about ``target_seconds`` on this machine."""
    size = 64 * 1024
    started = time.perf_counter()
    for _ in range(20):
        hashlib.sha256(_PAYLOAD[:size]).digest()
    per_call = (time.perf_counter() - started) / 20
    return max(4096, min(len(_PAYLOAD), int(size * target_seconds / per_call)))


def trivial(item: Any) -> Any:
    return item


def make_ops(kind: str, hash_bytes: int) -> tuple[Callable[[Any], Any], Callable[[list[Any]], Any]]:
    if kind == "cpu":
        view = memoryview(_PAYLOAD)[:hash_bytes]

        def work(item: Any) -> Any:
            hashlib.sha256(view).digest()  # releases the GIL for inputs over 2 KB
            return item
    else:

        def work(item: Any) -> Any:
            time.sleep(0.001)
            return item

    def batch_op(batch: list[Any]) -> int:
        return len(batch)

    return work, batch_op


def run_stoker(scenario: str, items: int, op: Callable[[Any], Any], batch_op: Callable[[list[Any]], Any]) -> int:
    builder = PipelineBuilder().add_source(range(items))
    if scenario == "a":
        builder.pipe(trivial).pipe(trivial)
    else:
        builder.pipe(op, concurrency=8).pipe(op, concurrency=8).aggregate(32).pipe(batch_op)
    pipeline = builder.add_sink(3).build()
    return sum(1 for _ in pipeline)


def run_spdl(scenario: str, items: int, op: Callable[[Any], Any], batch_op: Callable[[list[Any]], Any]) -> int:
    from spdl.pipeline import PipelineBuilder as SpdlBuilder

    builder = SpdlBuilder().add_source(range(items))
    if scenario == "a":
        builder = builder.pipe(trivial).pipe(trivial)
        threads = 2
    else:
        builder = builder.pipe(op, concurrency=8).pipe(op, concurrency=8).aggregate(32).pipe(batch_op)
        threads = 17
    pipeline = builder.add_sink(3).build(num_threads=threads)
    count = 0
    with pipeline.auto_stop():
        for _ in pipeline:
            count += 1
    return count


def run_bare(scenario: str, items: int, op: Callable[[Any], Any], batch_op: Callable[[list[Any]], Any]) -> int:
    if scenario == "a":
        with ThreadPoolExecutor(2) as pool:
            return sum(1 for _ in pool.map(trivial, pool.map(trivial, range(items))))

    def both(item: Any) -> Any:
        return op(op(item))

    count = 0
    batch: list[Any] = []
    with ThreadPoolExecutor(16) as pool:
        for result in pool.map(both, range(items)):
            batch.append(result)
            if len(batch) == 32:
                batch_op(batch)
                batch = []
                count += 1
    if batch:
        batch_op(batch)
        count += 1
    return count


ENGINES = {"stoker": run_stoker, "spdl": run_spdl, "bare pool": run_bare}


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=20_000, help="items for scenario a (b uses a tenth)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()

    engines = dict(ENGINES)
    try:
        import spdl.pipeline  # noqa: F401
    except ImportError:
        print("SPDL is not installed (pip install spdl): its column is left out", file=sys.stderr)
        del engines["spdl"]

    hash_bytes = _calibrate_hash_bytes()
    scenarios = {
        "a: 2 trivial stages": ("a", args.items, "cpu"),
        "b-cpu: 1 ms GIL-free CPU x2, c=8, batch 32": ("b", args.items // 10, "cpu"),
        "b-io: 1 ms sleep x2, c=8, batch 32": ("b", args.items // 10, "io"),
    }
    results: dict[str, dict[str, float]] = {}
    for label, (scenario, items, kind) in scenarios.items():
        op, batch_op = make_ops(kind, hash_bytes)
        rates: dict[str, list[float]] = {name: [] for name in engines}
        for _ in range(args.repeats):
            for name, run in engines.items():
                started = time.perf_counter()
                run(scenario, items, op, batch_op)
                rates[name].append(items / (time.perf_counter() - started))
        results[label] = {name: statistics.median(values) for name, values in rates.items()}

    print(f"\npipeline overhead, {os.cpu_count()} cores, median of {args.repeats} runs (items/s)")
    names = list(engines)
    print(f"{'scenario':<44}" + "".join(f"{name:>12}" for name in names) + f"{'vs spdl':>10}{'vs bare':>10}")
    for label, row in results.items():
        line = f"{label:<44}" + "".join(f"{row[name]:>12.0f}" for name in names)
        line += f"{row['stoker'] / row['spdl']:>9.2f}x" if "spdl" in row else f"{'-':>10}"
        line += f"{row['stoker'] / row['bare pool']:>9.2f}x"
        print(line)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"hash_bytes": hash_bytes, "results": results}, file, indent=2)


if __name__ == "__main__":
    main()
