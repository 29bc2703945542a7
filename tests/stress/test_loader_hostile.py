"""A careless or hostile user's calls into one Loader from other threads while its loop runs:
each is refused with an error that says why, or applied whole; never a silent change of what the
epoch delivers or of what its record says."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stoker import Loader
from stoker.errors import ConfigurationError
from tests.stress.test_loader import BATCH, BATCHES, SAMPLES, folder, new_loader

pytestmark = pytest.mark.usefixtures("switch_often")
__all__ = ["folder"]  # test_loader's fixture: SAMPLES files, each holding its own number


def from_another_thread(call: Callable[[], Any]) -> BaseException | None:
    """Run ``call`` in a new thread and wait for it; return what it raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            raised.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the call hung"
    return raised[0] if raised else None


@pytest.mark.parametrize("call", ["load_state_dict", "set_epoch"])
def test_a_state_or_an_epoch_set_from_another_thread_mid_loop_is_refused(folder: Path, call: str) -> None:
    # Once: both were taken while the loop ran; the loop went on delivering the old epoch's
    # plan over the new record, and `verify_epoch` failed after ("0 deliveries for 64 samples"
    # after load_state_dict, "48 deliveries for 64 samples" after set_epoch(3)).
    loader = new_loader(folder)
    fresh = loader.state_dict()
    delivered: list[int] = []
    raised: BaseException | None = None
    for count, batch in enumerate(loader):
        delivered.extend(batch.data)
        if count == 3:
            change = (lambda: loader.load_state_dict(fresh)) if call == "load_state_dict" else (lambda: loader.set_epoch(3))
            raised = from_another_thread(change)
    assert isinstance(raised, RuntimeError) and call in str(raised), raised
    assert sorted(delivered) == list(range(SAMPLES)) and loader.step == BATCHES
    assert loader.verify_epoch()["delivered"] == SAMPLES
    from_another_thread(lambda: loader.set_epoch(1))  # between runs: taken
    assert loader.sampler.epoch == 1


def test_the_iterating_thread_may_start_the_next_epoch_over_a_loop_it_left(folder: Path) -> None:
    # Lightning's epoch cut short (limit_train_batches): the loop's generator is left suspended,
    # and the same thread calls set_epoch for the next epoch before it drops that generator.
    loader = new_loader(folder)
    left = iter(loader)
    next(left)
    loader.set_epoch(1)
    assert loader.sampler.epoch == 1
    left.close()
    assert sorted(value for batch in loader for value in batch.data) == list(range(SAMPLES)), "epoch 1 whole"


def test_steps_excluded_from_many_threads_mid_epoch_are_each_left_out_or_refused(folder: Path) -> None:
    # Three threads each leave one step out while the loop runs. Once: each call replaced the
    # one waiting before it, and the epoch left out one batch, not three, without a word.
    loader = new_loader(folder)
    asked = [range(10 + index, 11 + index) for index in range(3)]
    outcomes: list[BaseException | None] = []
    delivered: list[int] = []
    for count, batch in enumerate(loader):
        delivered.extend(batch.data)
        if count == 2:
            threads = [
                threading.Thread(target=lambda steps=steps: outcomes.append(from_another_thread(lambda: loader.exclude(steps=steps))))
                for steps in asked
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
    taken = [error for error in outcomes if error is None]
    assert all(error is None or isinstance(error, ConfigurationError) for error in outcomes), outcomes
    assert len(outcomes) == 3 and taken, outcomes
    assert len(delivered) == SAMPLES - BATCH * len(taken), f"{len(taken)} exclusions taken, {len(delivered)} samples delivered"
    assert len(set(delivered)) == len(delivered)


def test_a_step_past_int64_in_a_loaded_state_is_refused(folder: Path, tmp_path: Path) -> None:
    # Once: taken without a word, and the loop's first batch failed in the provenance ledger
    # with numpy's "OverflowError: Python int too large to convert to C long".
    loader = new_loader(folder)
    state = loader.state_dict()
    state["step"] = 2**64
    resumed: Loader = new_loader(folder)
    resumed.record_provenance(tmp_path / "ledger")
    raised = from_another_thread(lambda: resumed.load_state_dict(state))
    assert isinstance(raised, ConfigurationError) and "'step'" in str(raised), raised
    state["step"] = 2**63 - BATCHES * 2
    resumed.load_state_dict(state)
    assert sum(len(batch.data) for batch in resumed) == SAMPLES
    resumed.close()
