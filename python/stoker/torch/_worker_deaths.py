"""A worker process that dies (a signal, ``os._exit``, the OOM killer) ends torch's pass with a
RuntimeError that names its pid, and the signal only when torch's SIGCHLD handler saw it first
("exited unexpectedly" otherwise). `NamedWorkerDeaths` passes torch's iterator through and adds
to that error which worker it was and how it ended, read from the process's exit status.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from typing import Any

__all__ = ["NamedWorkerDeaths", "how_it_ended"]

_DEAD_WORKER = re.compile(r"^DataLoader worker \(pids?(?:\(s\))? ([\d, ]+)\)")


class NamedWorkerDeaths(Iterator[Any]):
    """torch's iterator for one pass, its dead-worker errors told in full.

    Args:
        iterator: What ``iter(torch_dataloader)`` returned.
    """

    def __init__(self, iterator: Any) -> None:
        self.iterator = iterator

    def __iter__(self) -> NamedWorkerDeaths:
        return self

    def __next__(self) -> Any:
        try:
            return next(self.iterator)
        except RuntimeError as error:
            told = _tell_in_full(self.iterator, str(error))
            if told is None:
                raise
            raise RuntimeError(told) from None

    def __len__(self) -> int:
        return len(self.iterator)

    def __getattr__(self, name: str) -> Any:
        # torch's iterator's own attributes (e.g. _workers), for code that reaches for them.
        if name.startswith("__") or name == "iterator":
            raise AttributeError(name)
        return getattr(self.iterator, name)


def _tell_in_full(iterator: Any, message: str) -> str | None:
    """torch's message and, for each worker it names, its id and how it ended; None for any other
    RuntimeError."""
    found = _DEAD_WORKER.match(message)
    if found is None:
        return None
    pids = {int(pid) for pid in re.findall(r"\d+", found.group(1))}
    workers = getattr(iterator, "_workers", None) or []
    told = []
    for worker_id, worker in enumerate(workers):
        if worker.pid in pids:
            worker.join(timeout=1.0)  # reaped, so that its exit status is known
            told.append(f"worker {worker_id} of {len(workers)} (pid {worker.pid}) {how_it_ended(worker.exitcode)}")
            if worker.exitcode is not None and worker.exitcode < 0 and " is killed by signal: " not in message:
                # torch's own words when its SIGCHLD handler saw the death first, which users'
                # code and tests match on; the watcher thread got here first this time.
                message = f"DataLoader worker (pid {worker.pid}) is killed by signal: {signal.strsignal(-worker.exitcode)}."
    return f"{message.rstrip()} [{'; '.join(told)}]" if told else None


def how_it_ended(exit_code: int | None) -> str:
    """A process's ending in words: ``-9`` is "was killed by signal SIGKILL (Killed)"."""
    if exit_code is None:
        return "has ended (its exit status is not known yet)"
    if exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        return f"was killed by signal {name} ({signal.strsignal(-exit_code)})"
    return f"exited with status {exit_code}"
