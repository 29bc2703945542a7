"""The drop-in DataLoader gives torch's exact batches, fetches a batch's items concurrently,
and keeps torch's documented semantics where threads allow."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

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


class InFlight(Squares):
    """Each item says how many items of its process were being fetched at the same moment."""

    def __init__(self, size: int, wait: float) -> None:
        super().__init__(size)
        self.wait = wait
        self.lock = threading.Lock()
        self.now = 0

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        with self.lock:
            self.now += 1
            seen = self.now
        if self.wait:  # (even sleep(0) gives up the CPU: it is a wait)
            time.sleep(self.wait)
        with self.lock:
            self.now -= 1
        return torch.tensor([index]), seen


def _most_in_flight(loader: DataLoader) -> int:
    return max(int(batch[1].max()) for batch in loader)


@pytest.mark.parametrize("worker_kind", ["processes", "threads"])
def test_items_that_wait_are_fetched_a_whole_batch_at_once(worker_kind: str) -> None:
    loader = DataLoader(InFlight(128, wait=0.02), batch_size=16, num_workers=2, worker_kind=worker_kind)  # type: ignore[arg-type]
    # Each worker keeps its whole batch in flight; threads share one dataset, and so its count.
    assert _most_in_flight(loader) == (16 if worker_kind == "processes" else 2 * 16)


def test_a_random_split_of_waiting_items_is_fetched_a_whole_batch_at_once() -> None:
    """torch's Subset (what random_split makes) has a __getitems__ that only loops over its
    dataset's items: it does not stop the concurrent fetch."""
    train, _ = torch.utils.data.random_split(InFlight(160, wait=0.02), [128, 32], generator=torch.Generator().manual_seed(0))
    assert _most_in_flight(DataLoader(train, batch_size=16, num_workers=2)) == 16


def test_cheap_items_are_fetched_one_after_another() -> None:
    assert _most_in_flight(DataLoader(InFlight(512, wait=0), batch_size=16, num_workers=2)) == 1


def test_items_in_flight_is_the_users_choice() -> None:
    assert _most_in_flight(DataLoader(InFlight(64, wait=0.02), batch_size=16, num_workers=1, items_in_flight=1)) == 1
    barrier = threading.Barrier(8, timeout=20)

    class Gathering(Squares):
        def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
            barrier.wait()  # opens only when 8 items of the worker's batch are in flight
            return super().__getitem__(index)

    same(DataLoader(Gathering(32), batch_size=8, num_workers=1, items_in_flight=8), TorchDataLoader(Squares(32), batch_size=8))


def test_worker_init_fn_runs_once_per_worker_thread() -> None:
    seen: list[tuple[int, str]] = []
    lock = threading.Lock()

    def init(worker_id: int) -> None:
        with lock:
            seen.append((worker_id, threading.current_thread().name))

    list(DataLoader(Squares(), batch_size=8, num_workers=3, worker_init_fn=init, worker_kind="threads"))
    assert sorted(worker_id for worker_id, _ in seen) == [0, 1, 2]
    assert len({name for _, name in seen}) == 3


class PidDataset(Squares):
    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        return torch.tensor([index]), os.getpid()


def test_workers_are_processes_by_default_and_threads_on_request() -> None:
    batches = list(DataLoader(PidDataset(40), batch_size=8, num_workers=2))
    assert torch.equal(torch.cat([batch[0] for batch in batches]).flatten(), torch.arange(40))
    assert os.getpid() not in {int(pid) for batch in batches for pid in batch[1]}
    threaded = list(DataLoader(PidDataset(40), batch_size=8, num_workers=2, worker_kind="threads"))
    assert {int(pid) for batch in threaded for pid in batch[1]} == {os.getpid()}


def test_the_old_multiprocessing_keyword_still_works_and_says_the_new_one() -> None:
    with pytest.warns(DeprecationWarning, match="worker_kind='threads'"):
        loader = DataLoader(PidDataset(8), batch_size=4, num_workers=1, multiprocessing=False)
    assert loader.worker_kind == "threads"


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


def test_worker_threads_end_with_their_pass() -> None:
    def workers() -> list[threading.Thread]:
        return [thread for thread in threading.enumerate() if thread.name.startswith("stoker-torch-worker")]

    loader = DataLoader(Squares(64), batch_size=4, num_workers=2, worker_kind="threads")
    list(loader)
    iterator = iter(loader)
    next(iterator)
    del iterator  # a pass dropped half way
    deadline = time.monotonic() + 10
    while workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not workers()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is torch's default start method on Linux only")
def test_a_script_without_a_main_guard_runs_as_under_torch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """torch's default start method on Linux is fork: a script with no ``if __name__ ==
    "__main__":`` guard works there, and so it does here."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "from stoker.torch import DataLoader\n"
        "class Items:\n"
        "    def __len__(self): return 40\n"
        "    def __getitem__(self, index): return index\n"
        "print(sum(int(batch.sum()) for batch in DataLoader(Items(), batch_size=8, num_workers=2)))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sum(range(40)))
