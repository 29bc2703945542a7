"""In-order vs out-of-order prefetch under heavy-tail latency, simulated (no server): each sample
request takes 50 ms RTT with lognormal jitter, and 1% of requests are 10x slower.

Reports batch time p50 / p99 and samples/s for both modes. Targets (network storage issue,
measured there against real servers behind the latency proxy): out-of-order p99 <= 2x its
median, and >= 1.5x the in-order throughput.

Run:  python benchmarks/storage/prefetch.py [--batches 300] [--batch-size 32] [--max-batches 8]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

from stoker.bench import require_optimized_core
from stoker.sampling import OutOfOrderPrefetcher


def make_fetch(seed: int, rtt: float):  # type: ignore[no-untyped-def]
    generator = random.Random(seed)

    async def fetch(key: str) -> bytes:
        delay = rtt * generator.lognormvariate(0, 0.25)
        if generator.random() < 0.01:
            delay *= 10
        await asyncio.sleep(delay)
        return b""

    return fetch


async def measure(in_order: bool, batches: int, batch_size: int, max_batches: int, rtt: float) -> tuple[float, float, float]:
    samples = [(position, f"k{position}", 0) for position in range(batches * batch_size)]
    prefetcher = OutOfOrderPrefetcher(make_fetch(1, rtt), samples, batch_size=batch_size, max_batches=max_batches, in_order=in_order)
    times = []
    started = last = time.perf_counter()
    async for _ in prefetcher:
        now = time.perf_counter()
        times.append(now - last)
        last = now
    steady = times[max_batches * 4 :]  # past the slow start
    quantiles = statistics.quantiles(steady, n=100)
    return statistics.median(steady), quantiles[98], len(samples) / (time.perf_counter() - started)


def main() -> None:
    require_optimized_core()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-batches", type=int, default=8)
    parser.add_argument("--rtt-ms", type=float, default=50)
    args = parser.parse_args()
    if args.batches < args.max_batches * 4 + 2:
        parser.error(
            f"--batches must be at least {args.max_batches * 4 + 2}: the first {args.max_batches * 4} are the slow start, left out"
        )
    results = {}
    for label, in_order in (("in order", True), ("out of order", False)):
        results[label] = asyncio.run(measure(in_order, args.batches, args.batch_size, args.max_batches, args.rtt_ms / 1e3))
    print(f"{args.rtt_ms:.0f} ms RTT, lognormal jitter, 1% of requests 10x slower; batch {args.batch_size}, {args.max_batches} in flight")
    print(f"{'mode':<14} {'p50 batch':>10} {'p99 batch':>10} {'p99/p50':>8} {'samples/s':>10}")
    for label, (median, p99, rate) in results.items():
        print(f"{label:<14} {median * 1e3:>8.1f}ms {p99 * 1e3:>8.1f}ms {p99 / median:>8.2f} {rate:>10.0f}")
    print(f"out of order / in order throughput: {results['out of order'][2] / results['in order'][2]:.2f}x")


if __name__ == "__main__":
    main()
