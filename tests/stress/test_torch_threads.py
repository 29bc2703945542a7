"""The torch drop-in's thread workers, switching between almost any two bytecodes: every item
delivered once, a worker's exception raised to the consumer, what the workers share kept whole."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from stoker.torch import DataLoader  # noqa: E402
from stoker.torch import _dataloader as dataloader_module  # noqa: E402
from stoker.torch._threads import ThreadWorkers  # noqa: E402

pytestmark = pytest.mark.usefixtures("switch_often")


class Numbers:
    """Item ``i`` is ``i``; ``failing`` raises; ``wait`` seconds slept in each item."""

    def __init__(self, count: int, failing: int | None = None, wait: float = 0.0) -> None:
        self.count, self.failing, self.wait = count, failing, wait

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> int:
        if self.wait:
            time.sleep(self.wait)
        if index == self.failing:
            raise ValueError(f"item {index} is bad")
        return index


@pytest.mark.parametrize("in_order", [True, False])
def test_every_item_once_from_eight_thread_workers(in_order: bool) -> None:
    count = 3000
    loader = DataLoader(Numbers(count), batch_size=7, shuffle=True, num_workers=8, worker_kind="threads", in_order=in_order)
    delivered = [int(item) for batch in loader for item in batch]
    assert sorted(delivered) == list(range(count))


def test_an_items_exception_reaches_the_consumer_naming_the_item() -> None:
    loader = DataLoader(Numbers(2000, failing=1234), batch_size=10, num_workers=8, worker_kind="threads")

    def consume() -> tuple[list[int], str]:
        # In a function of its own: once it returns, nothing holds the pass, which stops its threads.
        delivered: list[int] = []
        try:
            for batch in loader:
                delivered.extend(int(item) for item in batch)
        except ValueError as error:
            return delivered, str(error)
        return delivered, "nothing raised"

    delivered, raised = consume()
    assert delivered == list(range(1230)), "every batch before the failing one, in order"
    assert "item 1234 is bad" in raised and "dataset[1234]" in raised, raised


def test_the_random_draws_flag_once_set_is_never_lost() -> None:
    # Once: each worker stored `flag or its own` after every batch, so a worker that read False
    # just before another stored True stored False back: the warning could be lost.
    workers_count, batches = 16, 3000

    def make_batch(fetcher: Any, indices: Any) -> Any:
        if indices == "draw":
            fetcher.draws_random_numbers = True
        return indices

    workers = ThreadWorkers(workers_count, make_batch, None, None)
    results: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
    try:
        for number in range(batches):
            workers.send(number % workers_count, results, number, "draw" if number == 5 else number)
        seen_drawing = False
        lost = 0
        for _ in range(batches):
            number, _ = results.get(timeout=30)
            seen_drawing = seen_drawing or number == 5
            if seen_drawing and not workers.draws_random_numbers:
                lost += 1
        assert lost == 0, f"the flag read False {lost} times after the drawing batch"
    finally:
        workers.stop()


def test_passes_started_at_once_share_one_set_of_persistent_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    # Once: `_thread_workers` was read and set without a lock: passes started at once in several
    # threads each started a set of threads, and all but one were never stopped.
    started: list[ThreadWorkers] = []

    class CountedWorkers(ThreadWorkers):
        def __init__(self, *args: Any) -> None:
            started.append(self)
            super().__init__(*args)

    monkeypatch.setattr(dataloader_module, "ThreadWorkers", CountedWorkers)
    loader = DataLoader(Numbers(64), batch_size=4, num_workers=2, worker_kind="threads", persistent_workers=True)
    barrier = threading.Barrier(8)

    def start_a_pass() -> None:
        barrier.wait(10)
        iter(loader)  # its batches are left: only the start is raced

    threads = [threading.Thread(target=start_a_pass) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        assert len(started) == 1, f"{len(started)} sets of persistent workers started"
    finally:
        for workers in started:
            workers.stop()


def test_threads_iterating_in_the_calling_process_never_cancel_each_others_items() -> None:
    # Once: with num_workers=0 the threads iterating one loader shared one batch fetcher, and a
    # larger batch in one replaced (shutting down, its queued items cancelled) the pool another
    # was fetching a batch's items in: a CancelledError reached the consumer.
    # Before the fix 2 of the 3 threads failed, each run (a CancelledError, or "cannot submit to
    # a pool that was shut down").
    sizes = list(range(2, 40))  # each batch larger than the last: each grows the item pool
    batches = [list(range(sum(sizes[:number]), sum(sizes[: number + 1]))) for number in range(len(sizes))]
    loader = DataLoader(Numbers(sum(sizes), wait=0.001), batch_sampler=batches, num_workers=0)
    results: list[list[int]] = [[], [], []]
    errors: list[BaseException] = []

    def iterate(slot: int) -> None:
        try:
            results[slot] = [int(item) for batch in loader for item in batch]
        except BaseException as error:  # carried to the test
            errors.append(error)

    threads = [threading.Thread(target=iterate, args=(slot,)) for slot in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, [repr(error) for error in errors]
    assert results == [list(range(sum(sizes)))] * 3
