"""Fixtures shared by the storage and ingest tests (imported by their conftest files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker_testbed.data.datasets import make_folder


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listings and indexes go to a fresh cache folder per test."""
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, dict[str, tuple[bytes, int]]]:
    """An ImageFolder tree of random payloads (`make_folder`) and what it holds."""
    root = tmp_path / "folder"
    return root, make_folder(root)
