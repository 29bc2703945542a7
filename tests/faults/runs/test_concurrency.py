"""The Loader under threads: a checkpoint thread calling state_dict in a tight loop, a second
iteration of one Loader, iterating past the end of an epoch."""

from __future__ import annotations

import threading

import pytest

from stoker import Loader
from stoker.loader import Sampling
from stoker.storage import MemoryStorage


def storage(count: int) -> MemoryStorage:
    return MemoryStorage({f"k{index}": index.to_bytes(4, "little") for index in range(count)})


def delivered(state: dict) -> int:
    return sum(end - start for start, end in state["sampler"]["delivered"])


def test_state_dict_from_a_checkpoint_thread_is_exact() -> None:
    loader = Loader(storage(50_000), batch_size=16, sampling=Sampling(seed=3))
    consumed = 0  # samples the loop has taken, published after each batch
    violations: list[tuple[int, int, int]] = []
    done = threading.Event()

    def checkpoint() -> None:
        while not done.is_set():
            before = consumed
            count = delivered(loader.state_dict())
            after = consumed
            # A state records at least what was consumed before the call; at most one batch more
            # (the one being marked) than what was consumed after it.
            if not before <= count <= after + 16:
                violations.append((before, count, after))

    thread = threading.Thread(target=checkpoint)
    thread.start()
    try:
        for batch in loader:
            consumed += len(batch)
    finally:
        done.set()
        thread.join()
    assert violations == []
    assert consumed == 50_000 and delivered(loader.state_dict()) == 50_000


def test_a_state_taken_mid_epoch_by_another_thread_resumes_exactly() -> None:
    loader = Loader(storage(5_000), batch_size=10, sampling=Sampling(seed=1))
    states: list[dict] = []
    taken = threading.Event()
    keys: list[str] = []
    for number, batch in enumerate(loader):
        keys.extend(batch.keys)
        if number == 100:
            thread = threading.Thread(target=lambda: (states.append(loader.state_dict()), taken.set()))
            thread.start()
            taken.wait(30)
            thread.join()
            break
    resumed = Loader(storage(5_000), batch_size=10, sampling=Sampling(seed=1))
    resumed.load_state_dict(states[0])
    keys.extend(key for batch in resumed for key in batch.keys)
    assert sorted(keys) == sorted(f"k{index}" for index in range(5_000))


def test_a_second_concurrent_iteration_is_an_error() -> None:
    loader = Loader(storage(200), batch_size=10)
    iterator = iter(loader)
    next(iterator)
    errors: list[BaseException] = []

    def second() -> None:
        try:
            next(iter(loader))
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=second, name="intruder")
    thread.start()
    thread.join(30)
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError) and "already being iterated" in str(errors[0])
    rest = sum(len(batch) for batch in iterator)
    assert rest == 190  # the first iteration lost nothing


def test_iterating_a_finished_epoch_starts_the_next_one() -> None:
    loader = Loader(storage(100), batch_size=10, sampling=Sampling(seed=5))
    first = [key for batch in loader for key in batch.keys]
    second = [key for batch in loader for key in batch.keys]
    assert loader.sampler.epoch == 1
    assert sorted(first) == sorted(second) == sorted(f"k{index}" for index in range(100))
    assert first != second  # a new epoch, a new order
    # A loop that breaks mid-epoch continues that epoch, not the next.
    for _batch in loader:
        break
    assert loader.sampler.epoch == 2 and sum(len(batch) for batch in loader) == 90


@pytest.mark.parametrize("pad", [True, False])
def test_an_empty_rank_stays_empty(pad: bool) -> None:
    # 3 samples over 4 ranks without padding: rank 3 has nothing, every epoch.
    loader = Loader(storage(3), batch_size=2, sampling=Sampling(rank=3, world_size=4, pad=pad))
    assert sum(len(batch) for batch in loader) == (1 if pad else 0)
