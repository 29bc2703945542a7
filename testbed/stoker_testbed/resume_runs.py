"""Kill-and-resume runs of a training job, for the trainers' tests (tests/lightning,
tests/accelerate, tests/jax): start a job in a session of its own, read the per-step records its
processes append (``log-<attempt>-<process>.jsonl``, one JSON object a step), and check a resumed
run against an uninterrupted one. And, for the operator's tests (tests/faults/runs), every rank of
a job run in lockstep in one process, saved and killed at given steps (`run_in_lockstep`)."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "assert_resumed_exactly",
    "finished_everywhere",
    "job_records",
    "mark_finished",
    "read_ahead",
    "run_in_lockstep",
    "run_in_session",
]


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


def read_ahead(loader: Any, ahead: int) -> Iterator[Any]:
    """``loader``'s batches read ``ahead`` batches ahead of the loop, held until handed on (what
    `stoker.device.to_jax` does, without a device; `Loader.hold_deliveries`)."""
    pending: collections.deque[Any] = collections.deque()
    with loader.hold_deliveries(ahead=ahead):
        for batch in loader:
            pending.append(batch)
            if len(pending) > ahead:
                handed = pending.popleft()
                loader.release(handed)
                yield handed
        while pending:
            handed = pending.popleft()
            loader.release(handed)
            yield handed


def run_in_lockstep(
    loaders: Sequence[Any],
    *,
    save_at: int,
    kill_at: int,
    out: str | os.PathLike[str],
    between: Callable[[int], None] | None = None,
    ahead: int = 0,
) -> dict[str, Any]:
    """Iterate every rank's Loader (``loaders``, rank by rank) one step at a time, to the end of
    the epoch: each rank's steps and ``[step, key]`` of every real sample delivered; after step
    ``save_at`` every rank's state is saved with that record to ``out`` (JSON), and after step
    ``kill_at`` the process SIGKILLs itself; ``between(step)`` is called after each step, while
    every rank's loop runs (what a training loop does between two batches); ``ahead``: batches
    each rank's loop is fed through `read_ahead`. Returns the record, with ``proof``
    (`verify_epoch`).

    Raises:
        AssertionError: A rank ran out of batches before the others.
    """
    record: dict[str, Any] = {"delivered": [], "steps": [0] * len(loaders)}
    streams = [read_ahead(loader, ahead) if ahead else iter(loader) for loader in loaders]
    while True:
        batches = [next(stream, None) for stream in streams]
        if all(batch is None for batch in batches):
            break
        assert all(batch is not None for batch in batches), "a rank ran out before the others"
        for rank, batch in enumerate(batches):
            record["steps"][rank] += 1
            record["delivered"] += [[loaders[rank].step - 1, key] for key, padding in zip(batch.keys, batch.padding) if not padding]
        if between is not None:
            between(loaders[0].step - 1)
        if loaders[0].step - 1 == save_at:
            record["states"] = [loader.state_dict() for loader in loaders]
            Path(out).write_text(json.dumps(record))
        if loaders[0].step - 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    record["proof"] = loaders[0].verify_epoch([loader.state_dict() for loader in loaders])
    return record


def mark_finished(work: Path, attempt: int, rank: int) -> None:
    """Called by a job's process when its training returned: see `finished_everywhere`."""
    (work / f"finished-{attempt}-{rank}").touch()


def finished_everywhere(work: Path, attempt: int, ranks: int) -> bool:
    """Whether every one of ``ranks`` processes of run ``attempt`` returned from its training.

    A job whose every process trained to the end and then failed on its way out is one the
    trainers' tests take as done, saying so: gloo's teardown at exit aborts a process now and
    then (pytorch/pytorch issue 190489, "terminate called without an active exception"), and
    destroying the process group first only narrows the race. What the tests check, every
    step's samples, is in the records either way.
    """
    return all((work / f"finished-{attempt}-{rank}").exists() for rank in range(ranks))


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
