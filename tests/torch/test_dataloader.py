"""The drop-in DataLoader gives torch's exact batches, fetches a batch's items concurrently,
and keeps torch's documented semantics where threads allow."""

from __future__ import annotations

import os
import threading

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import BatchSampler, SubsetRandomSampler  # noqa: E402
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402

from stoker import Loader  # noqa: E402
from stoker.loader import Sampling  # noqa: E402
from stoker.storage import MemoryStorage  # noqa: E402
from stoker.torch import DataLoader, LoaderDataset  # noqa: E402


class Squares:
    """A map-style dataset of (tensor, label) pairs."""

    def __init__(self, size: int = 103) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        return torch.tensor([index, index * index], dtype=torch.float32), index % 7


def same(ours, theirs) -> None:  # type: ignore[no-untyped-def]
    ours, theirs = list(ours), list(theirs)
    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs):
        if isinstance(reference, (list, tuple)):
            for part, expected in zip(mine, reference):
                assert torch.equal(part, expected)
        else:
            assert torch.equal(mine, reference)


@pytest.mark.parametrize("batch_size, drop_last", [(8, False), (8, True), (1, False), (103, False)])
def test_shuffle_with_a_generator_matches_torch(batch_size: int, drop_last: bool) -> None:
    ours = DataLoader(Squares(), batch_size=batch_size, shuffle=True, drop_last=drop_last, generator=torch.Generator().manual_seed(5))
    theirs = TorchDataLoader(
        Squares(), batch_size=batch_size, shuffle=True, drop_last=drop_last, generator=torch.Generator().manual_seed(5)
    )
    assert len(ours) == len(theirs)
    same(ours, theirs)


def test_the_global_rng_advances_as_under_torch() -> None:
    torch.manual_seed(11)
    ours = [list(DataLoader(Squares(), batch_size=10, shuffle=True)) for _ in range(2)]
    after_ours = torch.rand(1)
    torch.manual_seed(11)
    theirs = [list(TorchDataLoader(Squares(), batch_size=10, shuffle=True)) for _ in range(2)]
    after_theirs = torch.rand(1)
    for mine, reference in zip(ours, theirs):
        same(mine, reference)
    assert torch.equal(after_ours, after_theirs)


def test_sampler_batch_sampler_collate_and_no_batching() -> None:
    subset = [5, 3, 99, 0, 42, 7, 8]
    same(
        DataLoader(Squares(), batch_size=3, sampler=SubsetRandomSampler(subset, generator=torch.Generator().manual_seed(1))),
        TorchDataLoader(Squares(), batch_size=3, sampler=SubsetRandomSampler(subset, generator=torch.Generator().manual_seed(1))),
    )
    batches = [[1, 2], [50, 3, 4], [0]]
    same(DataLoader(Squares(), batch_sampler=batches), TorchDataLoader(Squares(), batch_sampler=batches))

    def keep_labels(items):  # type: ignore[no-untyped-def]
        return torch.tensor([label for _, label in items])

    same(DataLoader(Squares(), batch_size=4, collate_fn=keep_labels), TorchDataLoader(Squares(), batch_size=4, collate_fn=keep_labels))
    unbatched_ours = list(DataLoader(Squares(10), batch_size=None))
    unbatched_theirs = list(TorchDataLoader(Squares(10), batch_size=None))
    assert all(torch.equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(unbatched_ours, unbatched_theirs))
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Squares(), batch_sampler=BatchSampler(range(3), 2, False), batch_size=4)


def test_all_items_of_a_batch_are_fetched_at_once() -> None:
    batch_size = 16
    barrier = threading.Barrier(batch_size, timeout=20)

    class Gathering(Squares):
        def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
            # The very first item is fetched alone (to see whether it draws random numbers);
            # from the second batch on, the barrier opens only when a whole batch is in flight.
            if index >= batch_size:
                barrier.wait()
            return super().__getitem__(index)

    loader = DataLoader(Gathering(64), batch_size=batch_size, num_workers=batch_size, prefetch_factor=1)
    same(loader, TorchDataLoader(Squares(64), batch_size=batch_size))


def test_worker_init_fn_runs_once_per_fetch_thread() -> None:
    seen: list[tuple[int, str]] = []
    lock = threading.Lock()

    def init(worker_id: int) -> None:
        with lock:
            seen.append((worker_id, threading.current_thread().name))

    list(DataLoader(Squares(), batch_size=8, num_workers=3, worker_init_fn=init))
    assert sorted(worker_id for worker_id, _ in seen) == list(range(len(seen)))
    assert len({name for _, name in seen}) == len(seen) <= 3


class PidDataset(Squares):
    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        return torch.tensor([index]), os.getpid()


def test_process_fallback() -> None:
    batches = list(DataLoader(PidDataset(40), batch_size=8, num_workers=2, multiprocessing=True))
    assert torch.equal(torch.cat([batch[0] for batch in batches]).flatten(), torch.arange(40))
    assert os.getpid() not in {int(pid) for batch in batches for pid in batch[1]}


def test_an_exception_in_the_dataset_names_the_batch() -> None:
    class Broken(Squares):
        def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
            if index == 13:
                raise KeyError("sample 13 is missing")
            return super().__getitem__(index)

    with pytest.raises(Exception, match="sample 13 is missing"):
        list(DataLoader(Broken(), batch_size=8))


def test_loader_as_an_iterable_dataset() -> None:
    storage = MemoryStorage({f"k{index}": bytes([index]) for index in range(20)}, {f"k{index}": index for index in range(20)})
    loader = Loader(storage, batch_size=4, decode=lambda data: data[0], sampling=Sampling(shuffle="none", in_order=True))
    wrapped = TorchDataLoader(LoaderDataset(loader), batch_size=None)
    labels = torch.cat([labels for _, labels in wrapped])
    assert labels.tolist() == list(range(20))
