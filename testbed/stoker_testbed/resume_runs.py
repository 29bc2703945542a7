"""Kill-and-resume runs of a training job, for the trainers' tests (tests/lightning,
tests/accelerate, tests/jax): start a job in a session of its own, read the per-step records its
processes append (``log-<attempt>-<process>.jsonl``, one JSON object a step), and check a resumed
run against an uninterrupted one."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["assert_resumed_exactly", "job_records", "run_in_session"]


def run_in_session(command: Sequence[str], timeout: float = 300) -> tuple[int, str]:
    """Run ``command`` in a session of its own (a timeout or an interrupt kills its whole process
    group, children included); its exit status and its output, standard error folded in."""
    with subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True) as job:
        try:
            output, _ = job.communicate(timeout=timeout)
        except BaseException:
            os.killpg(job.pid, signal.SIGKILL)
            raise
    return job.returncode, output


def job_records(work: Path, attempt: int) -> list[dict[str, Any]]:
    """Every record the processes of run ``attempt`` wrote in ``work``, process by process."""
    return [json.loads(line) for path in sorted(work.glob(f"log-{attempt}-*.jsonl")) for line in path.read_text().splitlines()]


def assert_resumed_exactly(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    uninterrupted: list[dict[str, Any]],
    *,
    samples: int,
    resumed_at: int,
    epoch_of: Callable[[dict[str, Any]], int],
    process: str = "rank",
) -> None:
    """What the killed run trained before its checkpoint (``before``) and what the resumed run
    trained (``after``) hold each of ``samples`` once in each of the two epochs, and the resumed
    steps are, step for step and process for process, the uninterrupted run's.

    Records carry ``step``, ``keys`` (padding left out) and the process's number under ``process``.
    """
    assert before and after and min(record["step"] for record in after) == resumed_at
    for epoch in (0, 1):
        counts = collections.Counter(key for record in before + after if epoch_of(record) == epoch for key in record["keys"])
        assert len(counts) == samples and set(counts.values()) == {1}, (epoch, counts.most_common(3))
    expected = {(record["step"], record[process]): record["keys"] for record in uninterrupted}
    assert {(record["step"], record[process]): record["keys"] for record in after} == {
        key: keys for key, keys in expected.items() if key[0] >= resumed_at
    }
