"""docs/accelerate.md's loop with Accelerate's defaults (one process, ``python job.py``), killed
(SIGKILL) and run again: it resumes exactly from a checkpoint saved mid-epoch and from one saved
at an epoch's end, the loop's epochs starting at ``loader.epoch``. A loop that starts at epoch 0
again after ``load_state`` (what the page showed before) is warned of."""

from __future__ import annotations

import signal
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker import Loader
from stoker.loader import Sampling
from stoker.storage import MemoryStorage
from stoker_testbed.resume_runs import assert_resumed_exactly, job_records, run_in_session

pytest.importorskip("accelerate", reason="needs accelerate (pip install 'stoker[accelerate]')")

from stoker.accelerate import AcceleratedLoader  # noqa: E402 - after the skip: the package needs accelerate

JOB = Path(__file__).with_name("documented_loop_job.py")
SAMPLES = 203  # 34 steps an epoch, batches of 6
pytestmark = pytest.mark.timeout(300)


def run(work: Path, attempt: int, save_every: int, kill_at: int = -1) -> int:
    status, output = run_in_session(
        [sys.executable, str(JOB), str(work), "--attempt", str(attempt), "--save-every", str(save_every), "--kill-at", str(kill_at)]
    )
    assert status in (0, -signal.SIGKILL), output[-4000:]
    return status


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The records of an unkilled run (how often it saves does not change its batches)."""
    work = tmp_path_factory.mktemp("uninterrupted")
    assert run(work, 0, save_every=4) == 0
    return job_records(work, 0)


@pytest.mark.parametrize(
    "save_every, kill_at, resumed_at",
    [(4, 45, 44), (17, 40, 34)],
    ids=["saved-mid-epoch", "saved-at-the-epochs-end"],
)
def test_the_documented_loop_resumes_exactly_after_a_kill(
    tmp_path: Path, uninterrupted: list[dict[str, Any]], save_every: int, kill_at: int, resumed_at: int
) -> None:
    assert run(tmp_path, 0, save_every, kill_at=kill_at) == -signal.SIGKILL
    assert run(tmp_path, 1, save_every) == 0

    before = [record for record in job_records(tmp_path, 0) if record["step"] < resumed_at]
    after = job_records(tmp_path, 1)
    whole = uninterrupted
    assert_resumed_exactly(before, after, whole, samples=SAMPLES, resumed_at=resumed_at, epoch_of=lambda record: record["epoch"])
    assert [record["epoch"] for record in after] == [record["epoch"] for record in whole if record["step"] >= resumed_at]


def loader() -> AcceleratedLoader:
    storage = MemoryStorage({f"s{index:03d}": np.float32(index).tobytes() for index in range(20)})
    return AcceleratedLoader(Loader(storage, batch_size=4, sampling=Sampling(seed=2)))


def test_epoch_is_the_one_a_loop_goes_on_with() -> None:
    running = loader()
    assert running.epoch == 0
    batches = iter(running)
    next(batches)
    assert running.epoch == 0  # in the epoch
    for _ in batches:
        pass
    assert running.epoch == 1  # finished: the loop goes on with the next one
    running.set_epoch(1)
    assert running.epoch == 1 and running.loader.sampler.epoch == 1


def test_a_loop_starting_over_after_load_state_is_warned_and_one_from_loader_epoch_is_not() -> None:
    saved = loader()
    saved.set_epoch(1)
    batches = iter(saved)
    next(batches)
    state = saved.state_dict()
    batches.close()

    from_zero = loader()
    from_zero.load_state_dict(state)
    with pytest.warns(
        UserWarning, match=r"set_epoch\(0\) after load_state, whose Loader state goes on with epoch 1: .* range\(loader.epoch, epochs\)"
    ):
        from_zero.set_epoch(0)

    documented = loader()
    documented.load_state_dict(state)
    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        for epoch in range(documented.epoch, 2):
            documented.set_epoch(epoch)
            assert len(list(documented)) == 4  # the rest of epoch 1: 4 of its 5 batches
    assert not recorded, [str(warning.message) for warning in recorded]
