"""Peak resident memory of a process and its children, sampled while a run lasts.

``getrusage().ru_maxrss`` is no good for this on Linux: a child started with fork and exec keeps
its parent's high-water mark, and worker processes are not summed. So a thread samples the
resident set of the whole process tree (psutil when installed, else this process alone from
/proc) every 50 ms and keeps the largest total.
"""

from __future__ import annotations

import os
import threading
from types import TracebackType

__all__ = ["PeakMemory"]


def _tree_rss_bytes() -> int:
    try:
        import psutil
    except ImportError:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    process = psutil.Process()
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:  # a worker that just exited
            pass
    return total


class PeakMemory:
    """``with PeakMemory() as peak: ...`` then ``peak.megabytes``."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stoker-bench-memory", daemon=True)

    def _watch(self) -> None:
        while True:
            self.peak_bytes = max(self.peak_bytes, _tree_rss_bytes())
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, _tree_rss_bytes())

    @property
    def megabytes(self) -> float:
        return self.peak_bytes / 2**20
