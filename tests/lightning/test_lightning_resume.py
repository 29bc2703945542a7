"""A Lightning run over `StokerDataModule` killed mid-epoch (SIGKILL, both DDP ranks) and resumed
with ``fit(ckpt_path=...)`` from Lightning's own checkpoint: no sample lost or repeated in
either epoch, and every batch after the resume the one an uninterrupted run trained on at that
step and rank."""

from __future__ import annotations

import collections
import signal
import sys
from pathlib import Path

import pytest

from stoker_testbed.resume_runs import assert_resumed_exactly, finished_everywhere, job_records, run_in_session

pytest.importorskip("lightning", reason="needs PyTorch Lightning (pip install 'stoker[lightning]')")

JOB = Path(__file__).with_name("fit_job.py")
SAMPLES = 203
pytestmark = pytest.mark.timeout(600)


def fit(work: Path, run: int, *arguments: str) -> int:
    """The job in a session of its own (its kill takes its process group); its exit status."""
    status, output = run_in_session([sys.executable, str(JOB), str(work), "--run", str(run), *arguments])
    if status not in (0, -signal.SIGKILL) and finished_everywhere(work, run, ranks=2):
        print(f"every rank trained to the end, then the job failed on its way out (status {status}):\n{output[-2000:]}")
        return 0
    if status not in (0, -signal.SIGKILL):
        raise AssertionError(output[-4000:])
    return status


def test_a_killed_ddp_run_resumes_from_lightnings_checkpoint_with_the_same_batches(tmp_path: Path) -> None:
    uninterrupted, interrupted = tmp_path / "uninterrupted", tmp_path / "interrupted"
    uninterrupted.mkdir()
    interrupted.mkdir()
    assert fit(uninterrupted, 0) == 0
    assert fit(interrupted, 0, "--kill-at", "26") == -signal.SIGKILL  # step 26 of 34: in the second epoch
    checkpoint = interrupted / "checkpoints" / "epoch=1-step=24.ckpt"
    assert checkpoint.exists(), sorted(path.name for path in (interrupted / "checkpoints").iterdir())
    assert fit(interrupted, 1, "--resume", str(checkpoint)) == 0

    before = [record for record in job_records(interrupted, 0) if record["step"] < 24]  # what the checkpoint holds
    after = job_records(interrupted, 1)
    assert_resumed_exactly(
        before, after, job_records(uninterrupted, 0), samples=SAMPLES, resumed_at=24, epoch_of=lambda record: record["epoch"]
    )


def test_the_torch_style_dataloader_under_ddp_is_sharded_by_the_sampler_the_user_gives(tmp_path: Path) -> None:
    """`stoker.torch.DataLoader` is not an instance of torch's, so Lightning injects no
    `DistributedSampler` (docs/lightning.md says to give one): with it, each rank reads its
    share, and Lightning's per-epoch ``sampler.set_epoch`` still reaches it (a new order)."""
    assert fit(tmp_path, 0, "--torch-style") == 0
    per_epoch = []
    for epoch in (0, 1):
        steps = sorted((record["step"], record["rank"], record["keys"]) for record in job_records(tmp_path, 0) if record["epoch"] == epoch)
        counts = collections.Counter(key for _, _, keys in steps for key in keys)
        # DistributedSampler pads 203 samples to 204 (one read twice), as torch documents.
        assert len(counts) == SAMPLES and sum(counts.values()) == SAMPLES + 1, counts.most_common(2)
        per_epoch.append([keys for _, _, keys in steps])
    assert per_epoch[0] != per_epoch[1]
