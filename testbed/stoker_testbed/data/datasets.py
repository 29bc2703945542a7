"""Small datasets the tests (and benchmarks) make: random payloads named like an ImageFolder, in
memory or on disk, and fresh names for buckets and keyspaces."""

from __future__ import annotations

import itertools
import os
import random
from collections import Counter
from pathlib import Path

from stoker.loader import Loader
from stoker.storage import MemoryStorage

_names = itertools.count()


def dataset(count: int = 120, classes: int = 3, seed: int = 0) -> MemoryStorage:
    """Random payloads named like an ImageFolder, labelled by class."""
    generator = random.Random(seed)
    samples = {f"class_{index % classes}/{index:05d}.jpg": generator.randbytes(generator.randint(200, 4000)) for index in range(count)}
    return MemoryStorage(samples, {key: int(key.split("/")[0][-1]) for key in samples})


def epoch_contents(loader: Loader, truth: dict[str, bytes]) -> Counter[str]:
    """How many times one epoch of ``loader`` delivered each key, checking every sample's bytes
    against ``truth``."""
    seen: Counter[str] = Counter()
    for batch in loader:
        for key, data in zip(batch.keys, batch.data):
            assert data == truth[key]
            seen[key] += 1
    return seen


def unique(prefix: str) -> str:
    """A fresh bucket, prefix or keyspace name for one test."""
    return f"{prefix}{next(_names)}x{os.getpid()}"


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
