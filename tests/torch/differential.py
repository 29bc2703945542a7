"""Scaffolding for the differential tests: datasets (at module level, so that spawned workers can
import them) and `outcomes`, everything a training loop sees of one loader."""

from __future__ import annotations

import os
import random
import re
import signal
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

# Warnings of the environment, not of a DataLoader: JAX and Lance (once another test imported
# them) warn at every os.fork(), which torch's worker processes do.
_NOT_THE_LOADERS = ("os.fork() was called", "lance is not fork-safe")
_PID = re.compile(r"pid(\(s\))? [\d, ]+")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


class Numbers(Dataset):
    def __init__(self, size: int = 23) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.tensor([index, index * index]), index % 3


class Augmented(Numbers):
    """Random augmentation from all three global generators, as torchvision transforms draw."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        return torch.tensor([float(index)]) + torch.rand(1) + random.random() + float(np.random.rand()), index


class SlowAugmented(Augmented):
    """Waits like a remote read and draws: must still be fetched in torch's order."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        time.sleep(0.002)
        return super().__getitem__(index)


class WorkerFacts(Numbers):
    """What a worker knows of itself: id, count, seed, its dataset's type and torch's seed."""

    def __getitem__(self, index: int) -> tuple[Any, ...]:  # type: ignore[override]
        info = get_worker_info()
        if info is None:
            return index, -1, -1, -1, "", -1
        return index, info.id, info.num_workers, info.seed, type(info.dataset).__name__, torch.initial_seed()


class Failing(Numbers):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        if index % 10 == 5:
            raise ValueError(f"item {index} is bad")
        return super().__getitem__(index)


class Dying(Numbers):
    """Item 5 kills its worker: by a signal, or by os._exit."""

    def __init__(self, how: str) -> None:
        super().__init__(40)
        self.how = how

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        if index == 5 and get_worker_info() is not None:
            if self.how == "exit":
                os._exit(3)
            os.kill(os.getpid(), getattr(signal, self.how))
        time.sleep(0.01)
        return super().__getitem__(index)


class Slow(Numbers):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        time.sleep(3 if index == 9 else 0)
        return super().__getitem__(index)


class Batched(Numbers):
    """Fetches its batches itself."""

    def __getitems__(self, indices: list[int]) -> list[int]:
        return [index * 10 for index in indices]


class Offset(Numbers):
    """An attribute the main process changes between epochs (persistent workers keep their copy)."""

    offset = 0

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        return torch.tensor([index + self.offset]), 0


class NeedsItsWorker(Numbers):
    """Ready only once worker_init_fn has prepared this worker's copy."""

    ready = False

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        if not self.ready:
            raise RuntimeError("worker_init_fn has not prepared this copy")
        return super().__getitem__(index)


def prepare_worker(worker_id: int) -> None:
    info = get_worker_info()
    assert info is not None
    info.dataset.ready = True


def failing_init(worker_id: int) -> None:
    if worker_id == 1:
        raise OSError(f"worker {worker_id} cannot open its connection")


class Shards(IterableDataset):
    """Splits itself across workers; says a length shorter than what it yields."""

    def __init__(self, size: int = 30, declared: int | None = None) -> None:
        self.size, self.declared = size, declared

    def __len__(self) -> int:
        return self.declared if self.declared is not None else self.size

    def __iter__(self) -> Iterator[int]:
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(start, self.size, step))


def augmented_split() -> Any:
    """The training part of a random_split (a torch Subset) of an augmented dataset."""
    train, _ = torch.utils.data.random_split(SlowAugmented(), [17, 6], generator=torch.Generator().manual_seed(1))
    return train


def shuffled_datapipe() -> Any:
    """An IterDataPipe with a shuffle in it, which the loader's ``shuffle=True`` switches on."""
    from torch.utils.data.datapipes.iter import IterableWrapper

    return IterableWrapper(range(12)).shuffle()


def plain(value: Any) -> Any:
    """A batch as plain Python, to compare exactly (tensors with their dtype)."""
    if isinstance(value, torch.Tensor):
        return (str(value.dtype), value.tolist())
    if isinstance(value, (list, tuple)):
        return [plain(part) for part in value]
    if isinstance(value, dict):
        return {key: plain(part) for key, part in value.items()}
    return value


def outcomes(make: Callable[[], Any], epochs: int = 1, max_errors: int = 20, between_epochs: Callable[[], None] | None = None) -> list[Any]:
    """Seeds the global generators, builds a loader and runs ``epochs`` passes, recording each
    batch, each exception (type and first line, pids masked) and where it came (``iter`` or
    ``next``), and every warning said."""
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    seen: list[Any] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = make()
        errors = 0
        for epoch in range(epochs):
            if epoch and between_epochs is not None:
                between_epochs()
            seen.append(("epoch", epoch, "len", _length(loader)))
            try:
                iterator = iter(loader)
            except Exception as error:  # noqa: BLE001 - the point is to compare whatever is raised
                seen.append(("raised at iter", type(error).__name__, _first_line(error)))
                continue
            while errors < max_errors:
                try:
                    batch = next(iterator)
                except StopIteration:
                    break
                except Exception as error:  # noqa: BLE001
                    errors += 1
                    seen.append(("raised at next", type(error).__name__, _first_line(error)))
                    continue
                seen.append(plain(batch))
            del iterator
        del loader
    said = [_ADDRESS.sub("", str(warning.message)) for warning in caught]
    seen.append(("warnings", [message for message in said if not message.startswith(_NOT_THE_LOADERS)]))
    return seen


def _length(loader: Any) -> Any:
    try:
        return len(loader)
    except TypeError as error:
        return ("TypeError", str(error))


def _first_line(error: BaseException) -> str:
    return _PID.sub("pid N", str(error).splitlines()[0] if str(error) else "")
