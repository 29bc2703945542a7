"""docs/accelerate.md's Trainer as ``python train.py`` runs it: one process, the Trainer's
defaults but for the page's settings, killed (SIGKILL) in its second epoch and run again with
``train(resume_from_checkpoint=True)``: the latest checkpoint is found and every step after it is
an unkilled run's."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from stoker_testbed.resume_runs import assert_resumed_exactly, job_records, run_in_session

pytest.importorskip("transformers", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")
pytest.importorskip("accelerate", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")

from tests.accelerate import trainer_job  # noqa: E402 - after the skips: the job needs transformers

SAMPLES, STEPS_PER_EPOCH = 203, 34  # batches of 6 in one process; a checkpoint every 4 steps
pytestmark = pytest.mark.timeout(300)


def test_one_process_resumes_from_the_latest_checkpoint_exactly(tmp_path: Path) -> None:
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    killed.mkdir()
    reference.mkdir()
    job = [sys.executable, trainer_job.__file__, str(killed)]
    status, output = run_in_session([*job, "--attempt", "0", "--kill-at", "45"])
    assert status == -signal.SIGKILL, output[-4000:]
    status, output = run_in_session([*job, "--attempt", "1", "--resume", "latest"])
    assert status == 0, output[-4000:]
    trainer_job.main([str(reference), "--attempt", "0"])  # unkilled, in this process

    before = [record for record in job_records(killed, 0) if record["step"] < 44]
    epoch_of = lambda record: record["step"] // STEPS_PER_EPOCH  # noqa: E731 - the Trainer's records carry no epoch
    assert_resumed_exactly(before, job_records(killed, 1), job_records(reference, 0), samples=SAMPLES, resumed_at=44, epoch_of=epoch_of)
