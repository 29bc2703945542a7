"""Shared makers for the fault suite: a folder of good and bad images, a shard set."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker_testbed.data.images import jpeg

# The bad files of the corrupt folder, by kind of damage.
BAD_FILES = {
    "c0/empty.jpg": b"",
    "c1/truncated.jpg": jpeg(64, 48, seed=99)[:300],
    "c2/random.jpg": bytes(range(256)) * 8,
}


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listings and indexes go to a fresh cache folder per test."""
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path_factory.mktemp("cache")))


def make_images(root: Path, count: int = 30, bad: dict[str, bytes] | None = None) -> list[str]:
    """An ImageFolder of ``count`` good JPEGs in three classes plus the ``bad`` files; returns
    the good keys."""
    good = []
    for index in range(count):
        key = f"c{index % 3}/{index:03d}.jpg"
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(jpeg(48, 40, seed=index))
        good.append(key)
    for key, data in (bad or {}).items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
    return good
