"""Real `torchrun` jobs on CPU (gloo, loopback only): a job of 3 ranks saving its loader with DCP
loses a rank to SIGKILL mid-epoch, is restarted with 2, and across both runs every sample is
delivered exactly once, each run counted up to its last checkpoint; ranks take equal steps (an
uneven step would hang the all-reduce: the timeout bounds that)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

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


def delivered(work: Path, run: int, up_to_step: int | None) -> Counter[str]:
    """Keys delivered by ``run`` at steps up to ``up_to_step`` (None: all), over its ranks."""
    seen: Counter[str] = Counter()
    for path in work.glob(f"log-{run}-*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if up_to_step is None or entry["step"] <= up_to_step:
                seen.update(entry["keys"])
    return seen


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
