"""The node cache's own cost per sample: a cold epoch's misses (a look, a claim, a store and the
claim given back) and a warm epoch's hits, against the same requests with no cache; on the event
loop that reads and in the cache's writer thread, which stores the misses.

Timed three ways: 32 requests a loop turn (as the Loader asks for them) in a quiet process, and
beside one busy Python thread (a training loop's Python: every time the loop's thread lets go of
the GIL, it waits for that thread's switch interval, 5 ms, to take it back); and one request
every ``--spacing-ms`` (responses of a store 50 ms away trickle in: a rank at 200-500 samples/s),
where the writer gets its entries one at a time. The no-cache requests are the floor: the loop's
own turns, whose waits let go of the GIL as well.

Run:  python benchmarks/storage/node_cache_path.py [--samples 4000] [--size-kb 20] [--spacing-ms 2]

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
WRITER = "stoker-cache-writer"  # `SampleCache`'s writer thread


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


def writer_cpu() -> dict[int, float]:
    """CPU seconds of each cache writer thread alive now, by thread id."""
    seconds = {}
    for thread in threading.enumerate():
        if thread.name == WRITER and thread.ident is not None:
            with contextlib.suppress(OSError):  # ended just now
                seconds[thread.ident] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return seconds


def timed(
    request: Callable[[int], Awaitable[None]], first: int, samples: int, *, settle: Callable[[], None], spacing: float = 0.0
) -> tuple[float, float, float]:
    """Microseconds per sample of wall time, of the loop thread's CPU and of the writer's, for
    ``samples`` requests numbered from ``first``: ``BATCH`` at a time, or one every ``spacing``
    seconds. ``settle`` returns once what they handed the writer is stored."""

    async def run() -> None:
        if spacing:
            for number in range(first, first + samples):
                await request(number)
                await asyncio.sleep(spacing)
            return
        for start in range(first, first + samples, BATCH):
            await asyncio.gather(*(request(number) for number in range(start, min(start + BATCH, first + samples))))

    writers, wall, cpu = writer_cpu(), time.perf_counter(), time.thread_time()
    asyncio.run(run())
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    settle()
    writer = sum(seconds - writers.get(ident, 0.0) for ident, seconds in writer_cpu().items())
    return wall / samples * 1e6, cpu / samples * 1e6, writer / samples * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--size-kb", type=int, default=20)
    parser.add_argument("--spacing-ms", type=float, default=2.0, help="between requests made one at a time")
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
        spaced = f"quiet, one request every {arguments.spacing_ms:g} ms"
        for number, setting in enumerate(("quiet", "one busy Python thread", spaced)):
            base = 2 * samples * number  # each setting's misses are its own
            spacing = arguments.spacing_ms / 1e3 if setting == spaced else 0.0
            with BusyThread() if setting == "one busy Python thread" else contextlib.nullcontext():
                floor = timed(no_cache, base, samples, settle=cache.flush, spacing=spacing)
                misses = timed(through_cache, base, samples, settle=cache.flush, spacing=spacing)
                hits = timed(through_cache, base, samples, settle=cache.flush, spacing=spacing)
            rows.append((setting, floor, misses, hits))
        cache.close()

    print(
        f"{samples:,} requests of {arguments.size_kb} KB; us per sample: wall / the loop thread's CPU "
        "(wall not shown for requests spaced out: it is their spacing)"
    )
    print("| requests | no cache | cache, misses (cold epoch) | cache, hits (warm epoch) | a miss's own CPU: loop + writer |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for setting, floor, misses, hits in rows:
        walls = ("", "", "") if setting == spaced else (f"{floor[0]:,.1f} / ", f"{misses[0]:,.1f} / ", f"{hits[0]:,.1f} / ")
        print(
            f"| {setting} | {walls[0]}{floor[1]:,.1f} | {walls[1]}{misses[1]:,.1f} | {walls[2]}{hits[1]:,.1f} | "
            f"{misses[1] - floor[1]:,.1f} + {misses[2]:,.1f} |"
        )


if __name__ == "__main__":
    main()
