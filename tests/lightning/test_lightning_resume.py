"""A Lightning run over `StokerDataModule` killed mid-epoch (SIGKILL, both DDP ranks) and resumed
with ``fit(ckpt_path=...)`` from Lightning's own checkpoint: no sample lost or repeated in
either epoch, and every batch after the resume the one an uninterrupted run trained on at that
step and rank."""

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

pytest.importorskip("lightning", reason="needs PyTorch Lightning (pip install 'stoker[lightning]')")

JOB = Path(__file__).with_name("fit_job.py")
SAMPLES = 203
pytestmark = pytest.mark.timeout(600)


def fit(work: Path, run: int, *arguments: str) -> int:
    """The job in a session of its own (its kill takes its process group); its exit status."""
    with subprocess.Popen(
        [sys.executable, str(JOB), str(work), "--run", str(run), *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as job:
        try:
            output, _ = job.communicate(timeout=300)
        except BaseException:
            os.killpg(job.pid, signal.SIGKILL)
            raise
    if job.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(output[-4000:])
    return job.returncode


def records(work: Path, run: int) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(work.glob(f"log-{run}-*.jsonl")) for line in path.read_text().splitlines()]


def test_a_killed_ddp_run_resumes_from_lightnings_checkpoint_with_the_same_batches(tmp_path: Path) -> None:
    uninterrupted, interrupted = tmp_path / "uninterrupted", tmp_path / "interrupted"
    uninterrupted.mkdir()
    interrupted.mkdir()
    assert fit(uninterrupted, 0) == 0
    assert fit(interrupted, 0, "--kill-at", "26") == -signal.SIGKILL  # step 26 of 34: in the second epoch
    checkpoint = interrupted / "checkpoints" / "epoch=1-step=24.ckpt"
    assert checkpoint.exists(), sorted(path.name for path in (interrupted / "checkpoints").iterdir())
    assert fit(interrupted, 1, "--resume", str(checkpoint)) == 0

    before = [record for record in records(interrupted, 0) if record["step"] < 24]  # what the checkpoint holds
    after = records(interrupted, 1)
    assert before and after and min(record["step"] for record in after) == 24
    # Each sample once per epoch, counting the killed run up to its checkpoint and the resumed run.
    for epoch in (0, 1):
        counts = collections.Counter(key for record in before + after if record["epoch"] == epoch for key in record["keys"])
        assert len(counts) == SAMPLES and set(counts.values()) == {1}, (epoch, counts.most_common(3))
    # Step for step, rank for rank: the batches of the run that was never interrupted.
    expected = {(record["step"], record["rank"]): record["keys"] for record in records(uninterrupted, 0)}
    assert {(record["step"], record["rank"]): record["keys"] for record in after} == {
        key: keys for key, keys in expected.items() if key[0] >= 24
    }


def test_the_torch_style_dataloader_under_ddp_is_sharded_by_the_sampler_the_user_gives(tmp_path: Path) -> None:
    """`stoker.torch.DataLoader` is not an instance of torch's, so Lightning injects no
    `DistributedSampler` (docs/lightning.md says to give one): with it, each rank reads its
    share, and Lightning's per-epoch ``sampler.set_epoch`` still reaches it (a new order)."""
    assert fit(tmp_path, 0, "--torch-style") == 0
    per_epoch = []
    for epoch in (0, 1):
        steps = sorted((record["step"], record["rank"], record["keys"]) for record in records(tmp_path, 0) if record["epoch"] == epoch)
        counts = collections.Counter(key for _, _, keys in steps for key in keys)
        # DistributedSampler pads 203 samples to 204 (one read twice), as torch documents.
        assert len(counts) == SAMPLES and sum(counts.values()) == SAMPLES + 1, counts.most_common(2)
        per_epoch.append([keys for _, _, keys in steps])
    assert per_epoch[0] != per_epoch[1]
