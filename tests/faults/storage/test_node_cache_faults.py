"""The node's shared sample cache when a rank dies: a claim held by a killed process is taken
over at once (no wait for it to lapse), and a process killed in the middle of writing leaves a
cache whose entries read back whole."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from stoker.storage import SampleCache

CLAIM_AND_DIE = """
import asyncio, os, signal, sys
from stoker.storage import SampleCache
cache = SampleCache(sys.argv[1], max_bytes=4 << 20)
data, claim = asyncio.run(cache.get_or_claim("s1"))
assert data is None and claim is not None
print("claimed", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

WRITE_FOREVER = """
import sys
from stoker.storage import SampleCache
cache = SampleCache(sys.argv[1], max_bytes=8 << 20)
index = 0
while True:
    cache.put(f"s{index % 200}", bytes([index % 200]) * (64 << 10))
    index += 1
    if index == 50:
        print("writing", flush=True)
"""


def test_a_claim_held_by_a_killed_rank_is_taken_over(tmp_path: Path) -> None:
    rank = subprocess.run([sys.executable, "-c", CLAIM_AND_DIE, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert rank.returncode == -signal.SIGKILL and "claimed" in rank.stdout
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    data, claim = asyncio.run(asyncio.wait_for(cache.get_or_claim("s1"), 10))
    assert data is None and claim is not None, "this process fetches it: the dead rank's claim is not waited on"


def test_a_rank_killed_mid_write_leaves_whole_entries(tmp_path: Path) -> None:
    writer = subprocess.Popen([sys.executable, "-c", WRITE_FOREVER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    cache = SampleCache(tmp_path, max_bytes=8 << 20)
    found = [index for index in range(200) if (data := cache.get(f"s{index}")) is not None and data == bytes([index]) * (64 << 10)]
    missing_or_whole = [cache.get(f"s{index}") in (None, bytes([index]) * (64 << 10)) for index in range(200)]
    assert all(missing_or_whole) and len(found) >= 40
    cache.put("after", b"x" * 100)
    assert cache.get("after") == b"x" * 100, "the cache is writable after the crash"


HAND_OVER_AND_DIE = """
import asyncio, os, signal, sys
from stoker.storage import SampleCache
cache = SampleCache(sys.argv[1], max_bytes=64 << 20)

async def main():
    looks = await asyncio.gather(*(cache.get_or_claim(f"s{index}") for index in range(100)))
    for index, (_, claim) in enumerate(looks):
        await cache.store(f"s{index}", bytes([index]) * (64 << 10), claim)  # handed to the writer thread

asyncio.run(main())
print("handed", flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # entries may still be waiting for the writer, their claims held
"""


def test_a_rank_killed_with_entries_waiting_for_its_writer_leaves_no_claim_and_whole_entries(tmp_path: Path) -> None:
    rank = subprocess.run([sys.executable, "-c", HAND_OVER_AND_DIE, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert rank.returncode == -signal.SIGKILL and "handed" in rank.stdout, rank.stderr
    cache = SampleCache(tmp_path, max_bytes=64 << 20)

    async def look_all() -> list[tuple[bytes | None, str | None]]:
        return await asyncio.gather(*(cache.get_or_claim(f"s{index}") for index in range(100)))

    # Every entry is whole or missing, and a missing one is this process's to fetch at once: the
    # dead rank's claims went with it.
    looks = asyncio.run(asyncio.wait_for(look_all(), 10))
    for index, (data, claim) in enumerate(looks):
        assert (data == bytes([index]) * (64 << 10) and claim is None) or (data is None and claim is not None), index
    cache.close()


CHURN = """
import random, sys
from stoker.storage import SampleCache
cache = SampleCache(sys.argv[1], max_bytes=2 << 20)
rank, wrong, found = int(sys.argv[2]), 0, 0
payload = lambda index: index.to_bytes(4, "little") * (250 + index % 700)
names = list(range(rank % 2, 3000, 2))
for round in range(3):
    random.Random(rank * 10 + round).shuffle(names)  # in an order of its own: a scan in order would only ever miss
    for index in names:
        data = cache.get(f"s{index}")
        found += data is not None
        wrong += data is not None and data != payload(index)
        cache.put(f"s{index}", payload(index))
print(wrong, found, flush=True)
"""


def test_processes_storing_and_reading_through_evictions_and_index_rebuilds_never_see_other_bytes(tmp_path: Path) -> None:
    # Four processes, a 2 MB limit for 3,000 names of 1-3 KB: segments go, the index is rebuilt
    # (a handle's index replaced under it), entries are stored again; every read is whole or missing.
    ranks = [
        subprocess.Popen([sys.executable, "-c", CHURN, str(tmp_path), str(rank)], stdout=subprocess.PIPE, text=True) for rank in range(4)
    ]
    outputs = [rank.communicate(timeout=300)[0].split() for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0, 0, 0]
    assert all(wrong == "0" for wrong, _ in outputs), outputs
    assert all(int(found) > 0 for _, found in outputs), "the processes read what the others stored"
    cache = SampleCache(tmp_path, max_bytes=2 << 20)
    assert 0 < cache.size <= 2 << 20 and len(cache) > 100
