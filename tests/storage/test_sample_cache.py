"""SampleCache: byte limit with least-recently-used eviction, reopening, concurrent use."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from stoker.storage import SampleCache


def test_least_recently_used_entries_go_first(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=300)
    for name in "abc":
        cache.put(name, name.encode() * 100)
    assert cache.get("a") == b"a" * 100  # a is now the most recent
    cache.put("d", b"d" * 100)
    assert cache.get("b") is None
    assert [cache.get(name) is not None for name in "acd"] == [True, True, True]
    assert cache.size == 300


def test_an_entry_larger_than_the_limit_is_not_kept(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=10)
    cache.put("big", b"x" * 11)
    assert cache.get("big") is None and cache.size == 0


def test_reopening_finds_the_entries_and_keeps_the_limit(tmp_path: Path) -> None:
    first = SampleCache(tmp_path, max_bytes=1000)
    for index in range(10):
        first.put(f"sample{index}", bytes(100))
        time.sleep(0.02)  # file times are only as fine as the kernel's clock tick
    second = SampleCache(tmp_path, max_bytes=500)
    assert second.size == 500
    assert second.get("sample9") == bytes(100)
    assert second.get("sample0") is None  # the oldest were evicted on open


def test_concurrent_readers_and_writers_never_see_partial_entries(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path, max_bytes=64 << 10)
    payloads = {f"s{index}": bytes([index]) * 4096 for index in range(64)}
    errors: list[str] = []

    def work(offset: int) -> None:
        for _round in range(20):
            for index in range(offset, 64, 4):
                name = f"s{index}"
                got = cache.get(name)
                if got is not None and got != payloads[name]:
                    errors.append(name)
                cache.put(name, payloads[name])

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert cache.size <= 64 << 10


def test_a_non_positive_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="positive"):
        SampleCache(tmp_path, max_bytes=0)
