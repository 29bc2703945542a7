"""Small datasets on disk for the storage tests."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listings and indexes go to a fresh cache folder per test."""
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path_factory.mktemp("cache")))


def make_folder(root: Path, classes: int = 3, per_class: int = 7, seed: int = 0) -> dict[str, tuple[bytes, int]]:
    """An ImageFolder tree of random payloads; returns {relative path: (bytes, label)}."""
    generator = random.Random(seed)
    samples: dict[str, tuple[bytes, int]] = {}
    for label in range(classes):
        name = f"class_{label}"
        (root / name / "nested").mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            folder = f"{name}/nested" if index % 3 == 0 else name
            key = f"{folder}/img.{index:03d}.jpg"
            data = generator.randbytes(generator.randint(1, 5000))
            (root / key).write_bytes(data)
            samples[key] = (data, label)
    (root / "class_0" / "notes.txt").write_text("not an image, not listed")
    return samples


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, dict[str, tuple[bytes, int]]]:
    root = tmp_path / "folder"
    return root, make_folder(root)


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
