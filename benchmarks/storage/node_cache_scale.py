"""The node cache at scale: what opening it costs, a hit, and the index's rebuilds, at 10^5 and 10^6
entries (and what ``--entries`` asks for).

Every entry is checked when it is read (its name and a CRC-32 of its bytes), none when the cache is
opened: opening reads the store's state and its boot mark, whatever the count. The index grows by
rebuilds as entries come (the writer, under the node's write lock); the slowest thousand entries
of a fill hold the largest rebuild.

Run:  python benchmarks/storage/node_cache_scale.py [--entries 100000,1000000] [--value-bytes 100]

What it cannot show: other ranks waiting on the write lock while a rebuild holds it (the hosts
harness, benchmarks/distributed/hosts.py, has several processes), and a cache on a cold disk (the
files here are in the page cache).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time

from stoker.storage import SampleCache

STORE = 1000  # entries handed over between two flushes (the writer stores them as they come)


def scale(count: int, value_bytes: int, folder: str) -> str:
    """One line of figures for a cache of ``count`` entries made in ``folder``."""
    cache = SampleCache(folder, max_bytes=1 << 40)
    value = os.urandom(value_bytes)

    async def fill() -> float:
        slowest = 0.0
        for start in range(0, count, STORE):
            began = time.perf_counter()
            for number in range(start, min(count, start + STORE)):
                await cache.store(f"sample-{number}", value)  # handed to the cache's writer thread
            cache.flush()
            slowest = max(slowest, time.perf_counter() - began)
        return slowest

    started = time.perf_counter()
    slowest = asyncio.run(fill())
    filled = time.perf_counter() - started
    cache.close()
    opens, hits = [], []
    chooser = random.Random(5)
    for _ in range(5):
        began = time.perf_counter()
        again = SampleCache(folder, max_bytes=1 << 40)
        opens.append(time.perf_counter() - began)
        names = [f"sample-{chooser.randrange(count)}" for _ in range(32)]
        began = time.perf_counter()
        for _ in range(100):
            found = [again.get(name) for name in names]
        hits.append((time.perf_counter() - began) / 100 / len(names))
        if any(data != value for data in found):
            raise AssertionError("an entry read back other bytes than were stored")
        held = len(again)
        again.close()
    entries = os.path.join(again.folder, "entries")
    on_disk = sum(os.path.getsize(os.path.join(entries, name)) for name in os.listdir(entries))
    return (
        f"| {count:,} | {held:,} | {min(opens) * 1e3:.2f} ms | {min(hits) * 1e6:.1f} us | {filled / count * 1e6:.1f} us | "
        f"{slowest * 1e3:,.0f} ms | {on_disk / 2**20:,.0f} MiB |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", default="100000,1000000", help="comma-separated counts")
    parser.add_argument("--value-bytes", type=int, default=100)
    arguments = parser.parse_args()
    print(f"entries of {arguments.value_bytes} B, flushed every {STORE:,}; opening and a hit (`get`): best of 5")
    print("| entries | held | opening | a hit | filling, per entry | slowest 1,000 (a rebuild's) | its files |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for count in (int(text) for text in arguments.entries.split(",")):
        with tempfile.TemporaryDirectory(prefix="stoker-node-cache-scale-") as folder:
            print(scale(count, arguments.value_bytes, folder), flush=True)


if __name__ == "__main__":
    main()
