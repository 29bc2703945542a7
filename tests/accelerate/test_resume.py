"""Hugging Face's Trainer fed by stoker (`StokerTrainer`), two processes under torchrun, killed
mid-epoch (SIGKILL, every process) and resumed with ``train(resume_from_checkpoint=...)``: no
sample lost or repeated in either epoch, and each batch after the resume the one the
uninterrupted run trained on at that step and rank (the Trainer's own resume re-reads and
discards the epoch's first batches; this one reads none of them again)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stoker_testbed.resume_runs import assert_resumed_exactly, finished_everywhere, job_records, run_in_session

pytest.importorskip("transformers", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")
pytest.importorskip("accelerate", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")

JOB = Path(__file__).with_name("trainer_job.py")
SAMPLES = 203
STEPS_PER_EPOCH = 17  # 203 samples padded to 102 a rank, 6 a batch
pytestmark = pytest.mark.timeout(600)


def train(work: Path, attempt: int, *arguments: str, job: Path = JOB) -> str:
    """The job under torchrun (in a session of its own, so that a timeout ends all of it):
    "done" (every rank trained to the end, see `finished_everywhere`), or "killed" where rank 0
    killed itself (SIGKILL) and torchrun failed the job."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(job), str(work)]
    status, output = run_in_session([*command, "--attempt", str(attempt), *arguments])
    if status == 0:
        return "done"
    if "Signal 9 (SIGKILL) received" in output or (work / f"killed-{attempt}").exists():
        return "killed"
    if finished_everywhere(work, attempt, ranks=2):
        print(f"every rank trained to the end, then the job failed on its way out (status {status}):\n{output[-2000:]}")
        return "done"
    raise AssertionError(output[-4000:])


def test_a_killed_trainer_run_resumes_its_loader_from_the_checkpoint_folder(tmp_path: Path) -> None:
    uninterrupted, interrupted = tmp_path / "uninterrupted", tmp_path / "interrupted"
    uninterrupted.mkdir()
    interrupted.mkdir()
    assert train(uninterrupted, 0) == "done"
    assert train(interrupted, 0, "--kill-at", "26") == "killed"  # step 26 of 34: in the second epoch
    checkpoint = interrupted / "out" / "checkpoint-24"
    assert (checkpoint / "stoker_loader.json").exists(), sorted(path.name for path in checkpoint.iterdir())
    assert train(interrupted, 1, "--resume", str(checkpoint)) == "done"

    before = [record for record in job_records(interrupted, 0) if record["step"] < 24]
    after = job_records(interrupted, 1)
    epoch_of = lambda record: record["step"] // STEPS_PER_EPOCH  # noqa: E731 - the Trainer's records carry no epoch
    assert_resumed_exactly(before, after, job_records(uninterrupted, 0), samples=SAMPLES, resumed_at=24, epoch_of=epoch_of)


def test_an_accelerate_loop_resumes_its_loader_through_save_state_and_load_state(tmp_path: Path) -> None:
    job = JOB.with_name("accelerate_job.py")
    uninterrupted, interrupted = tmp_path / "uninterrupted", tmp_path / "interrupted"
    uninterrupted.mkdir()
    interrupted.mkdir()
    assert train(uninterrupted, 0, job=job) == "done"
    assert train(interrupted, 0, "--kill-at", "26", job=job) == "killed"
    assert train(interrupted, 1, "--resume", str(interrupted / "state-24"), job=job) == "done"

    before = [record for record in job_records(interrupted, 0) if record["step"] < 24]
    after = job_records(interrupted, 1)
    assert_resumed_exactly(
        before, after, job_records(uninterrupted, 0), samples=SAMPLES, resumed_at=24, epoch_of=lambda record: record["epoch"]
    )
