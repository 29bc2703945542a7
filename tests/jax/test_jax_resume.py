"""Two JAX processes (CPU, gloo) training over global arrays assembled from each process's stoker
batches, killed mid-epoch (SIGKILL, both) and resumed from Orbax's own checkpoint, parameters
and Loader together: no sample lost or repeated in either epoch, each step's batches those of an
uninterrupted run, and each global array made of exactly the two processes' rows."""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stoker_testbed.resume_runs import assert_resumed_exactly, job_records

pytest.importorskip("jax", reason="needs JAX (pip install jax)")
pytest.importorskip("orbax.checkpoint", reason="needs Orbax (pip install orbax-checkpoint)")

JOB = Path(__file__).with_name("jax_job.py")
SAMPLES = 203
pytestmark = pytest.mark.timeout(600)


def run(work: Path, attempt: int, *arguments: str) -> str:
    """Both processes, each in a session of its own: "done", or "killed" (both died of SIGKILL)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, str(JOB), str(work), "--processes", "2", "--port", str(port), "--attempt", str(attempt), *arguments]
    output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    processes = [subprocess.Popen([*command, "--process", str(index)], start_new_session=True, **output) for index in (0, 1)]  # type: ignore[call-overload]
    first, second = processes
    try:
        texts = [process.communicate(timeout=300)[0] for process in processes]
    except BaseException:
        for process in processes:
            os.killpg(process.pid, signal.SIGKILL)
        raise
    codes = (first.returncode, second.returncode)
    if codes == (0, 0):
        return "done"
    if codes == (-signal.SIGKILL, -signal.SIGKILL):
        return "killed"
    raise AssertionError(f"exit statuses {codes}:\n" + "\n".join(text[-3000:] for text in texts))


def test_two_jax_processes_resume_from_orbax_with_the_same_global_batches(tmp_path: Path) -> None:
    uninterrupted, interrupted = tmp_path / "uninterrupted", tmp_path / "interrupted"
    uninterrupted.mkdir()
    interrupted.mkdir()
    assert run(uninterrupted, 0) == "done"
    assert run(interrupted, 0, "--kill-at", "26") == "killed"
    assert (interrupted / "checkpoints" / "24" / "loader" / "loader-process-1-of-2.json").exists()
    assert run(interrupted, 1, "--resume", "24") == "done"

    full = job_records(uninterrupted, 0)
    steps = collections.defaultdict(list)
    for record in full:
        steps[record["step"]].append(record)
    # Each global array holds both processes' rows and nothing else.
    for step, pair in steps.items():
        assert len(pair) == 2 and {record["rows"] for record in pair} == {12}, step
        assert pair[0]["global_sum"] == pair[1]["global_sum"] == sum(record["local_sum"] for record in pair), step

    before = [record for record in job_records(interrupted, 0) if record["step"] < 24]
    after = job_records(interrupted, 1)
    assert_resumed_exactly(before, after, full, samples=SAMPLES, resumed_at=24, epoch_of=lambda record: record["epoch"], process="process")
