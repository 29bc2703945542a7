"""Hugging Face's Trainer fed by stoker (`StokerTrainer`), two processes under torchrun, killed
mid-epoch (SIGKILL, every process) and resumed with ``train(resume_from_checkpoint=...)``: no
sample lost or repeated in either epoch, and each batch after the resume the one the
uninterrupted run trained on at that step and rank (the Trainer's own resume re-reads and
discards the epoch's first batches; this one reads none of them again)."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")
pytest.importorskip("accelerate", reason="needs transformers and accelerate (pip install 'stoker[accelerate]')")

JOB = Path(__file__).with_name("trainer_job.py")
SAMPLES = 203
STEPS_PER_EPOCH = 17  # 203 samples padded to 102 a rank, 6 a batch
pytestmark = pytest.mark.timeout(600)


def train(work: Path, attempt: int, *arguments: str, job: Path = JOB) -> str:
    """The job under torchrun (in a session of its own, so that a timeout ends all of it):
    "done", or "killed" where a rank died of SIGKILL and torchrun failed the job."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(job), str(work)]
    with subprocess.Popen(
        [*command, "--attempt", str(attempt), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as run:
        try:
            output, _ = run.communicate(timeout=300)
        except BaseException:
            os.killpg(run.pid, signal.SIGKILL)
            raise
    if run.returncode == 0:
        return "done"
    if "Signal 9 (SIGKILL) received" in output:
        return "killed"
    raise AssertionError(output[-4000:])


def records(work: Path, attempt: int) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(work.glob(f"log-{attempt}-*.jsonl")) for line in path.read_text().splitlines()]


def test_a_killed_trainer_run_resumes_its_loader_from_the_checkpoint_folder(tmp_path: Path) -> None:
    uninterrupted, interrupted = tmp_path / "uninterrupted", tmp_path / "interrupted"
    uninterrupted.mkdir()
    interrupted.mkdir()
    assert train(uninterrupted, 0) == "done"
    assert train(interrupted, 0, "--kill-at", "26") == "killed"  # step 26 of 34: in the second epoch
    checkpoint = interrupted / "out" / "checkpoint-24"
    assert (checkpoint / "stoker_loader.json").exists(), sorted(path.name for path in checkpoint.iterdir())
    assert train(interrupted, 1, "--resume", str(checkpoint)) == "done"

    before = [record for record in records(interrupted, 0) if record["step"] < 24]
    after = records(interrupted, 1)
    assert before and after and min(record["step"] for record in after) == 24
    for epoch in (0, 1):
        in_epoch = [record for record in before + after if record["step"] // STEPS_PER_EPOCH == epoch]
        counts = collections.Counter(key for record in in_epoch for key in record["keys"])
        assert len(counts) == SAMPLES and set(counts.values()) == {1}, (epoch, counts.most_common(3))
    expected = {(record["step"], record["rank"]): record["keys"] for record in records(uninterrupted, 0)}
    assert {(record["step"], record["rank"]): record["keys"] for record in after} == {
        key: keys for key, keys in expected.items() if key[0] >= 24
    }


def test_an_accelerate_loop_resumes_its_loader_through_save_state_and_load_state(tmp_path: Path) -> None:
    job = JOB.with_name("accelerate_job.py")
    uninterrupted, interrupted = tmp_path / "uninterrupted", tmp_path / "interrupted"
    uninterrupted.mkdir()
    interrupted.mkdir()
    assert train(uninterrupted, 0, job=job) == "done"
    assert train(interrupted, 0, "--kill-at", "26", job=job) == "killed"
    assert train(interrupted, 1, "--resume", str(interrupted / "state-24"), job=job) == "done"

    before = [record for record in records(interrupted, 0) if record["step"] < 24]
    after = records(interrupted, 1)
    assert before and after and min(record["step"] for record in after) == 24
    for epoch in (0, 1):
        counts = collections.Counter(key for record in before + after if record["epoch"] == epoch for key in record["keys"])
        assert len(counts) == SAMPLES and set(counts.values()) == {1}, (epoch, counts.most_common(3))
    expected = {(record["step"], record["rank"]): record["keys"] for record in records(uninterrupted, 0)}
    assert {(record["step"], record["rank"]): record["keys"] for record in after} == {
        key: keys for key, keys in expected.items() if key[0] >= 24
    }
