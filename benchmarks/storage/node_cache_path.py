"""The node cache's own cost per sample, on the event loop that reads: a cold epoch's misses (a
look, a claim, a store and the claim given back) and a warm epoch's hits, against the same
requests with no cache, in batches of 32 requests a loop turn (as the Loader asks for them).

Each is timed twice: in a quiet process, and beside one busy Python thread (a training loop's
Python: every time the loop's thread lets go of the GIL, it waits for that thread's switch
interval, 5 ms, to take it back). The no-cache requests are the floor: the loop's own turns, whose
waits let go of the GIL as well.

Run:  python benchmarks/storage/node_cache_path.py [--samples 4000] [--size-kb 20]

What it cannot show: the fetch itself (no store is asked here: the Loader's reads over S3 with and
without the cache are `benchmarks/distributed/hosts.py`), and other processes on the node writing
to the same cache (their write lock).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable

from stoker.storage import SampleCache

BATCH = 32


class BusyThread:
    """A Python thread that keeps the interpreter busy until stopped."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        while not self._stop.is_set():
            sum(range(100))

    def __enter__(self) -> BusyThread:
        self._thread.start()
        return self

    def __exit__(self, *_exception: object) -> None:
        self._stop.set()
        self._thread.join()


def timed(request: Callable[[int], Awaitable[None]], first: int, samples: int) -> tuple[float, float]:
    """Microseconds of wall time and of the loop thread's CPU per sample, for ``samples``
    requests numbered from ``first``, ``BATCH`` at a time."""

    async def run() -> None:
        for start in range(first, first + samples, BATCH):
            await asyncio.gather(*(request(number) for number in range(start, min(start + BATCH, first + samples))))

    wall, cpu = time.perf_counter(), time.thread_time()
    asyncio.run(run())
    return (time.perf_counter() - wall) / samples * 1e6, (time.thread_time() - cpu) / samples * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--size-kb", type=int, default=20)
    arguments = parser.parse_args()
    data = os.urandom(arguments.size_kb << 10)
    samples = arguments.samples

    with tempfile.TemporaryDirectory(prefix="stoker-node-cache-") as folder:
        cache = SampleCache(folder, max_bytes=4 * samples * len(data) + (64 << 20))

        async def no_cache(number: int) -> None:
            await asyncio.sleep(0)  # the fetch's own turn

        async def through_cache(number: int) -> None:
            name = f"sample-{number}"
            cached, claim = await cache.get_or_claim(name)
            if cached is None:
                await asyncio.sleep(0)
                await cache.store(name, data, claim)

        rows = []
        for setting in ("quiet", "one busy Python thread"):
            base = 0 if setting == "quiet" else 2 * samples  # each setting's misses are its own
            with BusyThread() if setting != "quiet" else contextlib.nullcontext():
                floor = timed(no_cache, base, samples)
                misses = timed(through_cache, base, samples)
                hits = timed(through_cache, base, samples)
            rows.append((setting, floor, misses, hits))
        cache.close()

    print(f"{samples:,} requests of {arguments.size_kb} KB, {BATCH} a loop turn; us per sample, wall / the loop thread's CPU")
    print("| process | no cache | cache, misses (cold epoch) | cache, hits (warm epoch) | a miss's own CPU |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for setting, floor, misses, hits in rows:
        print(
            f"| {setting} | {floor[0]:,.1f} / {floor[1]:,.1f} | {misses[0]:,.1f} / {misses[1]:,.1f} | "
            f"{hits[0]:,.1f} / {hits[1]:,.1f} | {misses[1] - floor[1]:,.1f} |"
        )


if __name__ == "__main__":
    main()
