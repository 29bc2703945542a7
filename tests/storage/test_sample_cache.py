"""SampleCache: one byte limit, oldest entries out first, shared by processes on one folder,
concurrent use, and cache trouble that never fails a sample."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from stoker.storage import SampleCache, hedged_copy

ENTRY = 100 << 10  # large entries live in files of their own, as samples do


def payload(index: int) -> bytes:
    return bytes([index % 251]) * ENTRY


def test_the_oldest_entries_go_first_and_the_limit_holds(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=1 << 20)
    for index in range(30):
        cache.put(f"s{index}", payload(index))
        assert cache.size <= (1 << 20) + ENTRY, "within one entry of the limit"
    assert cache.get("s29") == payload(29) and cache.get("s28") == payload(28)
    assert cache.get("s0") is None, "the first stored went first"
    assert (cache.hits, cache.misses) == (2, 1)


def test_an_entry_larger_than_the_limit_is_not_kept(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=ENTRY)
    cache.put("big", payload(0) + b"x")
    assert cache.get("big") is None


def test_reopening_finds_the_entries(tmp_path: Path) -> None:
    first = SampleCache(tmp_path, max_bytes=4 << 20)
    for index in range(5):
        first.put(f"s{index}", payload(index))
    first.close()
    second = SampleCache(tmp_path, max_bytes=4 << 20)
    assert [second.get(f"s{index}") for index in range(5)] == [payload(index) for index in range(5)]


WRITER = """
import sys
from stoker.storage import SampleCache
cache = SampleCache(sys.argv[1], max_bytes=int(sys.argv[2]))
for index in range(int(sys.argv[3]), int(sys.argv[4])):
    cache.put(f"s{index}", bytes([index % 251]) * (100 << 10))
"""


def test_processes_on_one_folder_share_the_entries_and_one_limit(tmp_path: Path) -> None:
    limit = 2 << 20
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(limit), str(start), str(start + 20)]) for start in (0, 20)
    ]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
    cache = SampleCache(tmp_path, max_bytes=limit)
    assert cache.size <= limit + ENTRY, "40 entries of 100 KB from two processes, one 2 MB limit"
    found = [index for index in range(40) if cache.get(f"s{index}") is not None]
    assert len(found) >= 10, f"this process reads what the others stored: {found}"
    assert all(cache.get(f"s{index}") == payload(index) for index in found), "whole entries"


def test_concurrent_readers_and_writers_never_see_partial_entries(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    errors: list[str] = []

    def work(offset: int) -> None:
        for _round in range(5):
            for index in range(offset, 64, 4):
                got = cache.get(f"s{index}")
                if got is not None and got != payload(index):
                    errors.append(f"s{index}")
                cache.put(f"s{index}", payload(index))

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert cache.size <= (4 << 20) + ENTRY


def test_a_cache_that_cannot_be_written_or_read_is_a_warning_not_a_failure(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)

    def full(*_arguments: object, **_options: object) -> None:
        raise OSError(28, "No space left on device")

    cache._entries.put_many = full  # every store goes through it
    cache._entries.get_many = full  # every read goes through it
    cache.put("s0", payload(0))
    cache.put("s1", payload(1))
    assert cache.get("s0") is None and cache.misses == 1
    assert caplog.text.count("cannot write it (OSError") == 1 and caplog.text.count("cannot read it (OSError") == 1


def test_a_non_positive_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="positive"):
        SampleCache(tmp_path, max_bytes=0)


def test_a_second_request_waits_for_the_claim_holders_entry(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)

    async def scenario() -> tuple[bytes | None, str | None]:
        missing, claim = await cache.get_or_claim("s1")
        assert missing is None and claim is not None, "the first request holds the claim"
        waiter = asyncio.ensure_future(cache.get_or_claim("s1"))
        await asyncio.sleep(0.05)
        assert not waiter.done(), "the second waits while the first fetches"
        cache.put("s1", payload(1), claim)
        return await asyncio.wait_for(waiter, 10)

    assert asyncio.run(scenario()) == (payload(1), None)


def test_a_failed_fetch_hands_the_claim_on(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)

    async def scenario() -> tuple[bytes | None, str | None]:
        _, claim = await cache.get_or_claim("s1")
        waiter = asyncio.ensure_future(cache.get_or_claim("s1"))
        await asyncio.sleep(0.02)
        cache.release("s1", claim)
        return await asyncio.wait_for(waiter, 10)

    data, claim = asyncio.run(scenario())
    assert data is None and claim is not None, "the waiter fetches it now"


def test_a_forked_child_reads_and_writes_the_same_cache(tmp_path: Path) -> None:
    import multiprocessing

    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    cache.put("parent", payload(1))
    context = multiprocessing.get_context("fork")  # a DataLoader worker started after the cache opened
    results = context.Queue()

    def child() -> None:
        results.put(cache.get("parent") == payload(1))
        cache.put("child", payload(2))
        results.put(True)

    process = context.Process(target=child)
    process.start()
    process.join(timeout=60)
    assert process.exitcode == 0 and results.get(timeout=5) and results.get(timeout=5)
    assert cache.get("child") == payload(2), "the parent reads what the child stored"


def test_entries_of_mixed_sizes_under_churn_stay_within_the_limit(tmp_path: Path) -> None:
    import random

    limit = 2 << 20
    cache = SampleCache(tmp_path, max_bytes=limit)
    chooser = random.Random(5)
    stored = []
    for index in range(600):
        size = chooser.choice([900, 3000, 20 << 10, 70 << 10, 300 << 10])
        cache.put(f"s{index}", bytes([index % 251]) * size)
        stored.append(size)
        assert cache.size <= limit, "the bytes charged never pass the limit"
    assert cache.get("s599") == bytes([599 % 251]) * stored[599], "the newest entry is there, whole"
    assert cache.get("s0") is None
    on_disk = sum(path.stat().st_size for path in (tmp_path / "entries").glob("log-*"))
    assert on_disk <= limit, "the entries' files stay within the limit"
    assert len(cache) >= 10


def test_stored_entries_from_an_event_loop_are_there_once_its_turn_ends(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)

    async def scenario() -> list[bytes | None]:
        claims = [await cache.get_or_claim(f"s{index}") for index in range(20)]
        for index, (_, claim) in enumerate(claims):
            await cache.store(f"s{index}", payload(index), claim)
        await asyncio.sleep(0)  # the loop's next turn stores them, then lets the claims go
        return [(await cache.get_or_claim(f"s{index}"))[0] for index in range(20)]

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) == [payload(index) for index in range(20)]


def test_closing_stores_what_is_held_back(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)

    async def store_and_stop() -> None:
        _, claim = await cache.get_or_claim("s1")
        await cache.store("s1", payload(1), claim)

    asyncio.run(store_and_stop())  # the loop may end before its next turn
    cache.close()
    assert SampleCache(tmp_path, max_bytes=4 << 20).get("s1") == payload(1)


def test_a_cache_from_before_the_machine_last_started_is_emptied(tmp_path: Path) -> None:
    boot_file = Path("/proc/sys/kernel/random/boot_id")
    if not boot_file.exists():
        pytest.skip("no boot id here (not Linux): every commit is flushed instead")
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    cache.put("s1", payload(1))
    cache.close()
    same_boot = SampleCache(tmp_path, max_bytes=4 << 20)
    assert same_boot.get("s1") == payload(1), "the same boot: kept"
    same_boot.close()
    (tmp_path / "entries" / "boot").write_text("an earlier boot")  # as a power cut would leave it
    reopened = SampleCache(tmp_path, max_bytes=4 << 20)
    assert reopened.get("s1") is None and len(reopened) == 0, "unflushed writes of an earlier boot are not trusted"
    reopened.put("s2", payload(2))
    assert reopened.get("s2") == payload(2)


def test_names_longer_than_a_key_are_kept_too(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    long_names = [f"s3://bucket/{'deep/' * 200}shard-{index}.tar bytes 0-8388607" for index in range(3)]
    for index, name in enumerate(long_names):
        cache.put(name, payload(index))
    assert [cache.get(name) for name in long_names] == [payload(index) for index in range(3)]


def test_one_turns_requests_are_looked_up_together_and_each_name_claimed_once(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    cache.put("cached", payload(9))

    async def scenario() -> list[tuple[bytes | None, str | None]]:
        # A batch's requests arrive in one loop turn; "s1" twice (a hedged copy, say).
        looks = [asyncio.ensure_future(cache.get_or_claim(name)) for name in ("s0", "s1", "s1", "cached", "s2")]
        await asyncio.sleep(0.05)
        assert looks[2].done() is False, "the second request for s1 waits for the first's entry"
        _, first_claim = looks[1].result()
        cache.put("s1", payload(1), first_claim)
        await asyncio.wait_for(looks[2], 10)
        return [look.result() for look in looks]

    outcomes = asyncio.run(scenario())
    assert [data for data, _ in outcomes] == [None, None, payload(1), payload(9), None]
    claims = [claim for _, claim in outcomes]
    assert None not in (claims[0], claims[1], claims[4]) and len({claims[0], claims[1], claims[4]}) == 3
    assert claims[2] is None and claims[3] is None
    assert (cache.hits, cache.misses) == (1, 4), "one hit or miss counted per request, however long it waited"


def test_a_request_cancelled_before_its_look_leaves_no_claim_behind(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)

    async def scenario() -> tuple[bytes | None, str | None]:
        look = asyncio.ensure_future(cache.get_or_claim("s1"))
        await asyncio.sleep(0)  # its name is queued for this turn's look
        look.cancel()
        await asyncio.sleep(0.01)
        return await asyncio.wait_for(cache.get_or_claim("s1"), 1)

    data, claim = asyncio.run(scenario())
    assert data is None and claim is not None, "nobody holds the cancelled request's claim: the next one gets it"


HOLD_CLAIM = """
import asyncio, sys, time
from stoker.storage import SampleCache
cache = SampleCache(sys.argv[1], max_bytes=4 << 20)
data, claim = asyncio.run(cache.get_or_claim("s1"))
print("claimed", flush=True)
sys.stdin.readline()
cache.put("s1", b"from the other rank", claim)
print("stored", flush=True)
sys.stdin.readline()
"""


def test_a_claim_held_by_another_live_process_is_waited_for(tmp_path: Path) -> None:
    rank = subprocess.Popen([sys.executable, "-c", HOLD_CLAIM, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert rank.stdin is not None and rank.stdout is not None
    try:
        assert rank.stdout.readline().strip() == "claimed"
        cache = SampleCache(tmp_path, max_bytes=4 << 20)

        async def scenario() -> tuple[bytes | None, str | None]:
            waiter = asyncio.ensure_future(cache.get_or_claim("s1", poll=0.01))
            await asyncio.sleep(0.1)
            assert not waiter.done(), "the other process's claim holds this request back"
            rank.stdin.write("\n")  # type: ignore[union-attr]
            rank.stdin.flush()  # type: ignore[union-attr]
            return await asyncio.wait_for(waiter, 10)

        assert asyncio.run(scenario()) == (b"from the other rank", None)
    finally:
        rank.kill()
        rank.wait(timeout=10)


@pytest.mark.parametrize("in_thread", [False, True], ids=["on the loop", "in a thread"])
def test_a_request_cancelled_once_its_look_claimed_leaves_no_claim_behind(tmp_path: Path, in_thread: bool) -> None:
    # A hedged read's loser is cancelled: here after its look took the claim but before the
    # request resumed to receive it. Nobody would fetch the sample, and every other request for
    # it would wait out CLAIM_SECONDS (the node then fetched it twice).
    cache = SampleCache(tmp_path, max_bytes=4 << 20)

    async def scenario() -> tuple[bytes | None, str | None]:
        look = asyncio.ensure_future(cache.get_or_claim("s1", in_thread=in_thread))
        await asyncio.sleep(0)  # the request has asked: its look is queued, or running in a thread
        if in_thread:
            look.cancel()  # the thread's look goes on and claims
        else:
            asyncio.get_running_loop().call_soon(look.cancel)  # after the turn's look, before the request resumes
        with pytest.raises(asyncio.CancelledError):
            await look
        return await asyncio.wait_for(cache.get_or_claim("s1"), 2)

    data, claim = asyncio.run(scenario())
    assert data is None and claim is not None, "the cancelled request's claim was let go of"


def test_any_buffer_is_stored_and_read_back_as_bytes(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    block = bytearray(payload(7) * 3)
    cache.put("view", memoryview(block)[5:40_005])
    cache.put("array", block)
    cache.put("bytes", payload(8))
    assert cache.get("view") == bytes(block[5:40_005])
    assert cache.get("array") == bytes(block)
    assert cache.get("bytes") == payload(8)


def test_the_lmdb_files_an_earlier_stoker_left_are_removed_never_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # stoker kept the node cache in LMDB before, which trusts its file (a damaged one crashed the
    # reading process). A folder a job left then is emptied of those two files, by name, and never
    # read; the user's other files stay.
    lmdb = pytest.importorskip("lmdb")
    folder = tmp_path / "entries"
    environment = lmdb.open(str(folder), map_size=1 << 30, max_dbs=4)
    tables = {name: environment.open_db(name.encode()) for name in ("entries", "stamps", "order", "totals")}
    with environment.begin(write=True) as transaction:
        transaction.put(b"s1", payload(1), db=tables["entries"])
    environment.close()
    (folder / "notes.txt").write_text("the user's")
    with caplog.at_level(logging.INFO, logger="stoker.storage"):
        cache = SampleCache(tmp_path, max_bytes=4 << 20)
    assert cache.get("s1") is None
    assert not (folder / "data.mdb").exists() and not (folder / "lock.mdb").exists() and (folder / "notes.txt").read_text() == "the user's"
    assert "data.mdb and lock.mdb of an earlier stoker's cache (LMDB) removed, never read" in caplog.text
    cache.put("s2", payload(2))
    assert len(cache) == 1 and cache.get("s2") == payload(2)


def test_a_hedged_copy_fetches_rather_than_wait_for_the_claim_it_hedges(tmp_path: Path) -> None:
    # A hedged copy is sent because the request holding the claim has not answered (a stuck
    # connection can hold it to the client's timeout): waiting for that claim would gain nothing.
    cache = SampleCache(tmp_path, max_bytes=4 << 20)

    async def scenario() -> tuple[tuple[bytes | None, str | None], bool]:
        _, claim = await cache.get_or_claim("s1")
        assert claim is not None
        with hedged_copy():
            copy = await asyncio.wait_for(cache.get_or_claim("s1"), 5)
        plain = asyncio.ensure_future(cache.get_or_claim("s1"))
        await asyncio.sleep(0.05)
        waits = not plain.done()
        await cache.store("s1", payload(1), claim)
        assert await asyncio.wait_for(plain, 5) == (payload(1), None)
        return copy, waits

    copy, waits = asyncio.run(scenario())
    assert copy == (None, None), "the copy fetches it itself, holding no claim"
    assert waits, "a request that is not a copy still waits for the claim's holder"
    cache.close()


def test_a_stored_entry_is_read_at_once_and_kept_once_flushed(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)

    async def scenario() -> None:
        for number in range(20):
            await cache.store(f"s{number}", payload(number))
        assert [cache.get(f"s{number}") for number in range(20)] == [payload(number) for number in range(20)]

    asyncio.run(scenario())
    cache.flush()
    cache.close()
    reopened = SampleCache(tmp_path, max_bytes=4 << 20)
    assert len(reopened) == 20 and reopened.get("s7") == payload(7), "every entry handed over is on disk"
    reopened.close()


def test_stores_past_the_writers_bound_wait_for_it_and_none_is_lost(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=16 << 20)
    cache._writer.max_bytes = 50_000  # less than one entry: every store waits for the writer

    async def scenario() -> None:
        await asyncio.gather(*(cache.store(f"s{number}", payload(number)) for number in range(60)))

    asyncio.run(scenario())
    cache.flush()
    assert len(cache) == 60 and all(cache.get(f"s{number}") == payload(number) for number in range(60))
    cache.close()


def test_entries_handed_over_one_at_a_time_are_stored_several_to_a_transaction(tmp_path: Path) -> None:
    # A cold epoch hands the writer one response at a time, milliseconds apart: a write
    # transaction each cost the writer more CPU than storing the entry in it.
    cache = SampleCache(tmp_path, max_bytes=16 << 20)
    transactions: list[int] = []
    put_many = cache._entries.put_many

    def counted(entries: list[tuple[str, bytes]], **options: bool) -> int:
        transactions.append(len(entries))
        return put_many(entries, **options)

    cache._entries.put_many = counted  # type: ignore[assignment]

    async def scenario() -> None:
        for number in range(10):
            await cache.store(f"s{number}", payload(number))
            await asyncio.sleep(0.001)

    asyncio.run(scenario())
    cache.flush()
    assert sum(transactions) == 10 and len(transactions) <= 5, f"entries a transaction: {transactions}"
    assert all(cache.get(f"s{number}") == payload(number) for number in range(10))
    cache.close()


def test_a_claim_let_go_of_while_a_copy_of_its_entry_waits_to_be_stored_is_let_go_of_after_it(tmp_path: Path) -> None:
    # A hedged copy stores its entry without the claim; its original, cancelled, lets go of the
    # claim. Let go of before the entry is on disk, another rank would take the claim, find
    # nothing and fetch the object again.
    cache = SampleCache(tmp_path, max_bytes=64 << 20)
    other = SampleCache(tmp_path, max_bytes=64 << 20)  # another process's view: only the disk

    async def scenario() -> None:
        _, claim = await cache.get_or_claim("s1")
        assert claim is not None
        commits = threading.Event()
        put_many = cache._entries.put_many

        def slow_put_many(*arguments: object, **options: object) -> int:
            commits.wait(5)  # the writer is busy storing
            return put_many(*arguments, **options)  # type: ignore[arg-type]

        cache._entries.put_many = slow_put_many  # type: ignore[method-assign]
        with hedged_copy():
            assert await cache.get_or_claim("s1") == (None, None)
            await cache.store("s1", payload(1))  # the copy's entry, no claim
        cache.release("s1", claim)  # the original, cancelled
        assert not cache._claims.take_many([("s1", "probe")])[0], "the claim is held while the entry waits"
        commits.set()
        cache.flush()
        assert other.get("s1") == payload(1)

    asyncio.run(scenario())
    cache.close()
    other.close()
