"""What else holds the CPU: the kernel's own accounting of how long this process's threads waited
to run, how busy the machine was, and what limits the process's cores.

A decode thread that waits for a core looks, from its own clocks, like a thread that waits on
I/O: little CPU time over a long wall time. Without this, the diagnosis would call it latency-bound
and advise more threads, the opposite of what helps when other processes hold the cores or a
container's CPU quota is spent. The kernel tells the difference:

- ``/proc/self/task/*/schedstat``: each thread's time on a CPU and time runnable but waiting in
  a run queue;
- ``/proc/stat``: the whole machine's busy time, of which this process's own CPU time is a part;
- the CPU affinity mask (``taskset``) and the cgroup's CPU quota (``cpu.max`` in cgroup v2,
  ``cpu.cfs_quota_us`` in v1) with its throttling counters.

Everything here is Linux; elsewhere `CpuSnapshot.take` finds nothing and `Contention` says
nothing.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType

from ..pipeline import CpuRoom

__all__ = ["Contention", "CpuLimits", "CpuMeter", "CpuSnapshot", "CpuWatch"]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuLimits:
    """The cores this process may use.

    Attributes:
        online: Cores the machine has.
        affinity: Cores the affinity mask allows (``taskset``, a job scheduler's cpuset).
        quota: The cgroup's CPU quota in cores (e.g. 0.5 for 50 ms every 100 ms), None when unlimited.
    """

    online: int
    affinity: int
    quota: float | None

    @property
    def usable(self) -> float:
        """Cores this process can keep busy at once."""
        return min(float(self.affinity), self.quota) if self.quota is not None else float(self.affinity)

    @property
    def threads(self) -> int:
        """Threads that keep the usable cores busy: ``usable`` rounded up (1 for a quota of half
        a core). `os.cpu_count` counts the machine's cores, not the ones a ``taskset``, a job's
        cpuset or a container's quota leave this process: a default from it oversubscribes."""
        return max(1, math.ceil(self.usable - 1e-9))

    @classmethod
    def read(cls) -> CpuLimits:
        online = os.cpu_count() or 1
        affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else online
        return cls(online, affinity, _cgroup_quota())


@dataclass(frozen=True)
class CpuSnapshot:
    """The counters at one moment (see the module notes)."""

    at: float
    process_cpu: float
    machine_busy: float | None
    threads: dict[int, tuple[int, int]]
    throttled: float | None

    @classmethod
    def take(cls) -> CpuSnapshot:
        times = os.times()
        return cls(time.monotonic(), times.user + times.system, _machine_busy(), _thread_schedstats(), _cgroup_throttled())


@dataclass(frozen=True)
class Contention:
    """How much this process's threads waited for a core between two snapshots, and why.

    Attributes:
        limits: The cores this process may use.
        seconds: Wall time between the snapshots.
        runqueue_wait_share: Share of the threads' runnable time spent waiting for a core (None:
            not measured).
        others_share: Share of the machine's cores used by other processes (None: not measured).
        throttled_seconds: Time the cgroup's quota held the process back (None: no quota).
    """

    limits: CpuLimits
    seconds: float
    runqueue_wait_share: float | None
    others_share: float | None
    throttled_seconds: float | None

    @classmethod
    def between(cls, start: CpuSnapshot, end: CpuSnapshot, limits: CpuLimits | None = None) -> Contention:
        limits = limits or CpuLimits.read()
        seconds = max(end.at - start.at, 1e-9)
        running = waiting = 0
        for thread, (run, wait) in end.threads.items():
            before = start.threads.get(thread, (0, 0))  # a thread started since: all of its time
            running, waiting = running + run - before[0], waiting + wait - before[1]
        share = waiting / (running + waiting) if running + waiting > 0 and end.threads else None
        others = None
        if start.machine_busy is not None and end.machine_busy is not None:
            busy_elsewhere = (end.machine_busy - start.machine_busy) - (end.process_cpu - start.process_cpu)
            others = min(1.0, max(0.0, busy_elsewhere / (seconds * limits.online)))
        throttled = end.throttled - start.throttled if start.throttled is not None and end.throttled is not None else None
        return cls(limits, seconds, share, others, throttled)

    @property
    def from_other_processes(self) -> bool:
        """Whether the threads waited because other processes use the cores (not a CPU quota or
        an affinity mask): then more threads win this process a larger share of them."""
        limits = self.limits
        if limits.quota is not None and limits.quota < limits.affinity:
            return False
        return limits.affinity >= limits.online and self.explanation() is not None

    def explanation(self) -> str | None:
        """Why this process's threads waited to run, in one sentence, or None when they hardly did
        (under a quarter of their runnable time) or nothing explains it."""
        if self.runqueue_wait_share is None or self.runqueue_wait_share < WAITED_TO_RUN:
            return None
        waited = f"stoker's threads waited to run {100 * self.runqueue_wait_share:.0f}% of the time they were ready"
        limits = self.limits
        if limits.quota is not None and limits.quota < limits.affinity:
            held = f", held back {self.throttled_seconds:.1f} s by it" if (self.throttled_seconds or 0.0) >= 0.05 else ""
            return f"this container is limited to {limits.quota:g} cores (its cgroup's CPU quota{held}) of the machine's {limits.online}: {waited}"
        if limits.affinity < limits.online:
            return f"this process may run on {limits.affinity} of the machine's {limits.online} cores (its CPU affinity, e.g. taskset): {waited}"
        if self.others_share is not None and self.others_share >= OTHERS_BUSY:
            return (
                f"{waited}, because other processes use the cores ({100 * self.others_share:.0f}% of the machine's {limits.online} cores)"
            )
        return None


class CpuWatch:
    """`Contention` over a run whose threads come and go (a Loader starts its threads each
    epoch): the threads are read every ``interval`` seconds, so one that ends keeps its last
    reading instead of vanishing from the count.

    Example::

        with CpuWatch() as watch:
            run()
        print(watch.contention.explanation())
    """

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.contention: Contention | None = None
        self._stop = threading.Event()
        self._seen: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="stoker-cpu-watch", daemon=True)

    def __enter__(self) -> CpuWatch:
        self._start = CpuSnapshot.take()
        self._seen = dict(self._start.threads)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            readings = _thread_schedstats()
            with self._lock:
                self._seen.update(readings)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        end = CpuSnapshot.take()
        with self._lock:
            self._seen.update(end.threads)
            end = replace(end, threads=dict(self._seen))
        self.contention = Contention.between(self._start, end)


class CpuMeter:
    """The cores over each interval between calls, as a live tuner reads them (`CpuRoom`):
    what this process used, what other processes used, and how long its threads waited to run.

    Returns None on the first call and where the kernel's accounting is not readable.
    """

    def __init__(self) -> None:
        self.limits = CpuLimits.read()
        self._last: CpuSnapshot | None = None

    def __call__(self) -> CpuRoom | None:
        now = CpuSnapshot.take()
        last, self._last = self._last, now
        if last is None or not now.threads:
            return None
        contention = Contention.between(last, now, self.limits)
        return CpuRoom(
            usable=self.limits.usable,
            used=(now.process_cpu - last.process_cpu) / contention.seconds,
            others=(contention.others_share or 0.0) * self.limits.online,
            waited=contention.runqueue_wait_share or 0.0,
        )


WAITED_TO_RUN = 0.25
"""Share of their runnable time this process's threads must wait for a core to call it contention."""

OTHERS_BUSY = 0.2
"""Share of the machine other processes must use to be named as the reason."""


def _thread_schedstats() -> dict[int, tuple[int, int]]:
    """{thread id: (ns on a CPU, ns waiting in a run queue)} for this process's live threads."""
    found: dict[int, tuple[int, int]] = {}
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            run, wait, _ = (task / "schedstat").read_text().split()
            found[int(task.name)] = (int(run), int(wait))
        except (OSError, ValueError):
            continue  # the thread ended meanwhile, or the kernel keeps no schedstats
    return found


def _machine_busy() -> float | None:
    """Seconds all cores spent busy since boot (user, nice, system, irq, softirq, steal)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / _CLOCK_TICKS


def _cgroup_dirs() -> list[Path]:
    """This process's CPU cgroup folders: v2's unified one, or v1's cpu controller."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controllers == "":
            found += [Path("/sys/fs/cgroup") / relative, Path("/sys/fs/cgroup/unified") / relative]
        elif "cpu" in controllers.split(","):
            found += [Path("/sys/fs/cgroup") / controllers / relative, Path("/sys/fs/cgroup/cpu,cpuacct") / relative]
    return [folder for folder in found if folder.is_dir()]


def _cgroup_quota() -> float | None:
    for folder in _cgroup_dirs():
        try:
            if (folder / "cpu.max").exists():
                quota, period = (folder / "cpu.max").read_text().split()
                if quota != "max":
                    return int(quota) / int(period)
            elif (folder / "cpu.cfs_quota_us").exists():
                quota_us = int((folder / "cpu.cfs_quota_us").read_text())
                if quota_us > 0:
                    return quota_us / int((folder / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
    return None


def _cgroup_throttled() -> float | None:
    """Seconds the cgroup's quota has held this process's cgroup back, if it has a cpu.stat."""
    for folder in _cgroup_dirs():
        try:
            stat = dict(line.split() for line in (folder / "cpu.stat").read_text().splitlines() if line.strip())
        except (OSError, ValueError):
            continue
        if "throttled_usec" in stat:  # cgroup v2
            return int(stat["throttled_usec"]) / 1e6
        if "throttled_time" in stat:  # cgroup v1, in ns
            return int(stat["throttled_time"]) / 1e9
    return None
