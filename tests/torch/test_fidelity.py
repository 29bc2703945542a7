"""The drop-in behaves like torch where torch's behaviour shows: when indices are drawn, infinite
samplers, samplers and loops sharing the global RNG, IterableDatasets with workers, and random
augmentation that is the same run after run."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402
from torch.utils.data import IterableDataset, Sampler, get_worker_info  # noqa: E402

from stoker.torch import DataLoader  # noqa: E402

from .test_dataloader import Squares, same  # noqa: E402


class CountingSampler(Sampler[int]):
    """Sequential indices, counting how many were drawn."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.drawn = 0

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        for index in range(self.size):
            self.drawn += 1
            yield index


@pytest.mark.parametrize("num_workers", [0, 2])
def test_indices_are_drawn_when_torch_draws_them(num_workers: int) -> None:
    counts = []
    for loader_type in (DataLoader, TorchDataLoader):
        sampler = CountingSampler(200_000)
        loader = loader_type(Squares(200_000), batch_size=4, sampler=sampler, num_workers=num_workers)
        iterator = iter(loader)
        at_start = sampler.drawn
        next(iterator)
        counts.append((at_start, sampler.drawn))
        del iterator
    assert counts[0] == counts[1], f"stoker drew (at iter, after one batch) {counts[0]}, torch {counts[1]}"
    assert counts[0][1] <= 4 * 5, "never the whole sampler"


class Forever(Sampler[int]):
    def __init__(self, size: int) -> None:
        self.size = size

    def __iter__(self) -> Iterator[int]:
        return (index % self.size for index in itertools.count())


@pytest.mark.parametrize("num_workers", [0, 3])
def test_an_infinite_sampler_yields(num_workers: int) -> None:
    ours = itertools.islice(DataLoader(Squares(), batch_size=8, sampler=Forever(103), num_workers=num_workers), 30)
    theirs = itertools.islice(TorchDataLoader(Squares(), batch_size=8, sampler=Forever(103)), 30)
    same(ours, theirs)


class GlobalRandomSampler(Sampler[int]):
    """Draws each index from the global RNG, lazily, as some custom samplers do."""

    def __init__(self, size: int, count: int) -> None:
        self.size, self.count = size, count

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.count):
            yield int(torch.randint(self.size, ()).item())


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_global_rng_sampler_interleaves_with_the_loop_as_under_torch(num_workers: int) -> None:
    def run(loader_type):  # type: ignore[no-untyped-def]
        torch.manual_seed(21)
        batches, loop_draws = [], []
        for batch in loader_type(Squares(), batch_size=5, sampler=GlobalRandomSampler(103, 40), num_workers=num_workers):
            batches.append(batch)
            loop_draws.append(torch.rand(1))  # e.g. dropout in the training step
        return batches, torch.cat(loop_draws)

    ours, ours_loop = run(DataLoader)
    theirs, theirs_loop = run(TorchDataLoader)
    same(ours, theirs)
    assert torch.equal(ours_loop, theirs_loop)


class Shards(IterableDataset):
    """Shards itself across workers with get_worker_info(), as torch documents."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(start, self.size, step):
            yield torch.tensor([index, -1 if info is None else info.id])

    def __len__(self) -> int:
        return self.size


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_iterable_dataset_is_sharded_by_itself_as_under_torch(num_workers: int) -> None:
    ours = list(DataLoader(Shards(37), batch_size=4, num_workers=num_workers))
    theirs = list(TorchDataLoader(Shards(37), batch_size=4, num_workers=num_workers))
    same(ours, theirs)
    values = sorted(int(value) for batch in ours for value in batch[:, 0])
    assert values == list(range(37)), "every item once, none lost or repeated"
    if num_workers:
        assert {int(worker) for batch in ours for worker in batch[:, 1]} == {0, 1}


class Augmenting(Squares):
    """Random augmentation from all three global generators."""

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        base, label = super().__getitem__(index)
        noise = torch.rand(2) + random.random() + float(np.random.rand())
        return base + noise, label


@pytest.mark.parametrize("num_workers", [0, 2])
def test_random_augmentation_is_the_same_run_after_run_and_torchs(num_workers: int) -> None:
    def run(loader_type: type):  # type: ignore[no-untyped-def]
        torch.manual_seed(5)
        random.seed(5)
        np.random.seed(5)
        loader = loader_type(Augmenting(40), batch_size=8, shuffle=True, num_workers=num_workers)
        return [list(loader) for _ in range(2)]

    first, second = run(DataLoader), run(DataLoader)
    for epoch_a, epoch_b in zip(first, second):
        same(epoch_a, epoch_b)
    assert not torch.equal(first[0][0][0], first[1][0][0]), "a new epoch augments anew"
    for epoch_a, epoch_b in zip(first, run(TorchDataLoader)):
        same(epoch_a, epoch_b)


@pytest.mark.parametrize(
    "options, error, message",
    [
        # torch's words, as torch's DataLoader says them (test_differential_construction.py)
        ({"batch_size": "32"}, ValueError, "batch_size should be a positive integer value, but got batch_size=32"),
        ({"batch_size": 32.0}, ValueError, "batch_size should be a positive integer value, but got batch_size=32.0"),
        ({"batch_size": 0}, ValueError, "batch_size should be a positive integer"),
        ({"num_workers": -1}, ValueError, "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing"),
        ({"prefetch_factor": 2}, ValueError, "prefetch_factor option could only be specified"),
        ({"worker_kind": "fibers"}, ValueError, "worker_kind should be 'processes' or 'threads', but got worker_kind='fibers'"),
        ({"items_in_flight": 0}, ValueError, "items_in_flight should be None or a positive integer, but got items_in_flight=0"),
        ({"num_workers": 2, "worker_kind": "threads", "multiprocessing_context": "spawn"}, ValueError, "runs no worker processes"),
    ],
)
def test_wrong_arguments_are_named(options: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        DataLoader(Squares(), **options)
