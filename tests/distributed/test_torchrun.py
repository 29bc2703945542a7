"""Real `torchrun` jobs on CPU (gloo, loopback only): a job of 3 ranks saving its loader with DCP
loses a rank to SIGKILL mid-epoch, is restarted with 2, and across both runs every sample is
delivered exactly once, each run counted up to its last checkpoint; ranks take equal steps (an
uneven step would hang the all-reduce: the timeout bounds that)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from stoker_testbed.data.training_logs import delivered

pytest.importorskip("torch.distributed.checkpoint")

SCRIPT = Path(__file__).with_name("train.py")
ROOT = Path(__file__).resolve().parents[2]


def torchrun(work: Path, ranks: int, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={ranks}",
        str(SCRIPT),
        str(work),
        *arguments,
    ]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def steps_per_rank(work: Path, run: int) -> list[int]:
    return sorted(len(path.read_text().splitlines()) for path in work.glob(f"log-{run}-*.jsonl"))


def test_a_rank_killed_mid_epoch_and_a_restart_with_fewer_ranks_deliver_every_sample_once(tmp_path: Path) -> None:
    first = torchrun(tmp_path, 3, "--die-at", "12", "--checkpoint-every", "5")
    assert first.returncode != 0, "rank 1 was killed: the job fails"
    assert (tmp_path / "latest").read_text() == "step-10", first.stderr[-3000:]
    assert not (tmp_path / "finished-0").exists()
    second = torchrun(tmp_path, 2, "--checkpoint-every", "5")
    assert second.returncode == 0, second.stderr[-3000:]
    assert (tmp_path / "finished-1").exists()
    counts = delivered(tmp_path, 0, up_to_step=10) + delivered(tmp_path, 1, up_to_step=None)
    assert counts == Counter(f"s{index:04d}" for index in range(601)), "every sample exactly once"
    assert len(set(steps_per_rank(tmp_path, 1))) == 1, "both ranks of the restarted job took the same steps"


def test_token_loader_ranks_with_uneven_documents_end_the_epoch_together(tmp_path: Path) -> None:
    from stoker import TokenLoader
    from stoker.storage import open_tokens

    generator = np.random.default_rng(0)
    lengths = np.where(generator.random(90) < 0.2, generator.integers(600, 1200, 90), generator.integers(1, 40, 90))
    documents = [np.full(int(length), index + 1, np.uint32) for index, length in enumerate(lengths)]
    np.concatenate(documents).tofile(tmp_path / "tokens.bin")
    np.save(tmp_path / "tokens.bin.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]))
    source = open_tokens(tmp_path / "tokens.bin", dtype="uint32")
    alone = [
        sum(1 for _ in TokenLoader(source, context_length=64, batch_size=4, seed=2, rank=rank, world_size=3, equal_steps=False))
        for rank in range(3)
    ]
    assert len(set(alone)) > 1, f"the data is uneven: each rank alone yields {alone} batches"
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3", str(SCRIPT.with_name("train_tokens.py"))]
        + [str(tmp_path / "tokens.bin"), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,  # a hang in the per-step all-reduce ends here
    )
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [tuple(int(value) for value in (tmp_path / f"steps-{rank}").read_text().split()) for rank in range(3)]
    assert [taken for taken, _ in steps] == [min(alone)] * 3, f"every rank takes the fewest ranks' steps ({steps}, alone {alone})"
    assert [ended for _, ended in steps] == [int(count > min(alone)) for count in alone], "ranks with batches left say so"
