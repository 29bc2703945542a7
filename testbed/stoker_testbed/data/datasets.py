"""Small datasets the tests (and benchmarks) make: random payloads named like an ImageFolder, in
memory or on disk, and fresh names for buckets and keyspaces."""

from __future__ import annotations

import itertools
import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from stoker.loader import Batch, Loader, Sampling
from stoker.storage import MemoryStorage, Storage

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


def resumed_epoch(
    open_dataset: Callable[[], Storage],
    sampling: Sampling,
    *,
    batch_size: int,
    stop_after: int,
    each_batch: Callable[[Storage, Batch], None] | None = None,
) -> list[bytes]:
    """One epoch's payloads, read as a job that is stopped and resumed reads it: a Loader over
    ``open_dataset()`` stopped after ``stop_after`` batches, its state saved, then a new Loader
    over a storage opened afresh (a new process would open it again) loading that state and
    reading the rest. ``each_batch`` checks every batch delivered before the stop."""
    delivered: list[bytes] = []
    with open_dataset() as storage:
        loader = Loader(storage, batch_size=batch_size, decode=bytes, sampling=sampling)
        for count, batch in enumerate(loader, start=1):
            delivered.extend(batch.data)
            if each_batch is not None:
                each_batch(storage, batch)
            if count == stop_after:
                break
        state = loader.state_dict()
        loader.close()
    with open_dataset() as storage:
        resumed = Loader(storage, batch_size=batch_size, decode=bytes, sampling=sampling)
        resumed.load_state_dict(state)
        delivered.extend(data for batch in resumed for data in batch.data)
        resumed.close()
    return delivered


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
