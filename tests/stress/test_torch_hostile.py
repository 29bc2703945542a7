"""The torch drop-in's thread workers used carelessly from several threads: passes abandoned
mid-epoch in other threads, DataLoaders with persistent workers dropped; no thread is left
behind, and a pass still running keeps its workers."""

from __future__ import annotations

import gc
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from stoker.torch import DataLoader  # noqa: E402
from tests.stress.test_torch_threads import Numbers  # noqa: E402

pytestmark = [pytest.mark.usefixtures("switch_often"), pytest.mark.filterwarnings("ignore::UserWarning")]


def stoker_threads() -> list[str]:
    """Names of the drop-in's threads alive now, once their stop has had time to land."""
    gc.collect()
    for _ in range(200):  # a thread asked to stop ends after its current batch: wait for it
        alive = [thread.name for thread in threading.enumerate() if thread.name.startswith("stoker-torch-worker")]
        if not alive:
            break
        time.sleep(0.05)
    return alive


@pytest.mark.parametrize("persistent", [False, True])
def test_passes_abandoned_in_other_threads_and_dropped_loaders_leave_no_worker_thread(persistent: bool) -> None:
    # Once: with persistent_workers, a DataLoader dropped kept its worker threads until the
    # interpreter's exit ("stoker-torch-worker-0", "-1" after `del loader`), so a loader made
    # each epoch left two more threads each time.
    assert stoker_threads() == []
    for _ in range(3):
        loader = DataLoader(Numbers(400), batch_size=10, num_workers=2, worker_kind="threads", persistent_workers=persistent)

        def abandon(loader: DataLoader = loader) -> None:
            passing = iter(loader)
            next(passing)  # and dropped mid-epoch

        for _ in range(3):  # one after another: passes at once are the test below
            thread = threading.Thread(target=abandon)
            thread.start()
            thread.join(60)
            assert not thread.is_alive(), "a pass hung"
        del loader, abandon
    assert stoker_threads() == []


def test_a_pass_outliving_its_persistent_loader_still_delivers_every_item() -> None:
    passing = iter(DataLoader(Numbers(300), batch_size=10, num_workers=2, worker_kind="threads", persistent_workers=True))
    gc.collect()
    assert sorted(int(item) for batch in passing for item in batch) == list(range(300))
    del passing
    assert stoker_threads() == []


def test_passes_at_once_over_persistent_workers_each_deliver_every_item() -> None:
    # Once: the passes shared one results queue, each letting go of the other's batches as a
    # dropped pass's: the second of two passes waited forever (also 3 threads each taking a first
    # batch, 2 runs of 4). Each pass now has a queue of its own.
    loader = DataLoader(Numbers(200), batch_size=10, num_workers=2, worker_kind="threads", persistent_workers=True)
    first, second = iter(loader), iter(loader)
    assert sorted(int(item) for batch in first for item in batch) == list(range(200))
    assert sorted(int(item) for batch in second for item in batch) == list(range(200))
    seen: list[list[int]] = []

    def read_whole_pass(loader: DataLoader = loader) -> None:
        seen.append(sorted(int(item) for batch in loader for item in batch))

    threads = [threading.Thread(target=read_whole_pass, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a pass waits forever for a batch another took"
    assert seen == [list(range(200))] * 3
    del loader, first, second, read_whole_pass
    assert stoker_threads() == []
