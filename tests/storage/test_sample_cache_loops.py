"""The node cache read from several event loops of one process: the storage's own loop (the
next epoch's early requests) and each pipeline's, which stops when its epoch ends. A loop that
stops before its turn's lookups or stores are done must hold up no other loop, and leave no
claim held (CI saw a node fetch samples twice: the others waited out the claim, then fetched)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from stoker.storage import SampleCache


def stop_before_its_next_turn(request: Coroutine[Any, Any, Any], *, waits: bool = True) -> None:
    """Run ``request`` on a loop of its own until it has asked the cache, then stop and close
    the loop before the turn that would answer it (a pipeline's loop ending its epoch).
    ``waits``: the request needs that turn (a lookup does; a store is handed to the cache's
    writer thread and needs no turn of its loop)."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(request)
    loop.call_soon(loop.stop)  # after the task's first step: the cache has its request
    loop.run_forever()
    if waits:
        assert not task.done(), "the request waits for the loop's next turn"
    loop.close()


def test_a_loop_stopped_before_its_lookups_turn_holds_up_no_other_loop(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    stop_before_its_next_turn(cache.get_or_claim("s1"))

    async def ask() -> list[tuple[bytes | None, str | None]]:
        return [await asyncio.wait_for(cache.get_or_claim(name), 10) for name in ("s1", "s2")]

    (first, first_claim), (second, second_claim) = asyncio.run(ask())
    assert first is None and first_claim is not None, "the stopped loop's request claimed nothing"
    assert second is None and second_claim is not None


def test_a_loop_stopped_before_its_stores_turn_still_stores_and_lets_the_claim_go(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    _, claim = asyncio.run(cache.get_or_claim("s1"))
    assert claim is not None
    stop_before_its_next_turn(cache.store("s1", b"one", claim), waits=False)

    async def store_another() -> tuple[bytes | None, str | None]:
        _, other = await cache.get_or_claim("s2")
        await asyncio.wait_for(cache.store("s2", b"two", other), 10)
        return await asyncio.wait_for(cache.get_or_claim("s1"), 10)

    assert asyncio.run(store_another()) == (b"one", None), "stored, and its claim let go of"
    assert cache.get("s2") == b"two"


def test_closing_stores_what_a_stopped_loop_held_back(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=4 << 20)
    _, claim = asyncio.run(cache.get_or_claim("s1"))
    stop_before_its_next_turn(cache.store("s1", b"one", claim), waits=False)
    cache.close()
    assert SampleCache(tmp_path, max_bytes=4 << 20).get("s1") == b"one"


def test_two_loops_on_two_threads_each_get_their_own_answers(tmp_path: Path) -> None:
    # Both loops ask for the same names at once: each name is fetched (claimed) by one request,
    # the others wait for its entry, and every request of both loops is answered.
    cache = SampleCache(tmp_path, max_bytes=16 << 20)
    names = [f"s{index}" for index in range(300)]
    answers: dict[int, list[bytes]] = {}
    fetches: list[str] = []
    lock = threading.Lock()

    async def read(name: str) -> bytes:
        data, claim = await cache.get_or_claim(name)
        if data is not None:
            return data
        with lock:
            fetches.append(name)
        await asyncio.sleep(0.001)
        await cache.store(name, name.encode(), claim)
        return name.encode()

    def run(number: int) -> None:
        async def all_of_them() -> list[bytes]:
            return await asyncio.wait_for(asyncio.gather(*(read(name) for name in names)), 60)

        answers[number] = asyncio.run(all_of_them())

    threads = [threading.Thread(target=run, args=(number,)) for number in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert answers == {number: [name.encode() for name in names] for number in range(2)}
    assert sorted(fetches) == sorted(names), "each name fetched once"
