"""What a rank's figures say of its host: how busy the cores it may run on were (all processes),
its own CPU time, and where its storage reads go. `StragglerWatch` and the metrics endpoint
(for `stoker top`) both report them, so the two name a straggler's cause alike."""

from __future__ import annotations

import os

__all__ = ["cores_busy_seconds", "others_share", "process_cpu_seconds", "reads_from", "usable_cores"]


def usable_cores() -> int:
    """Cores in this process's affinity mask."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def cores_busy_seconds() -> float | None:
    """Seconds the cores in this process's affinity mask spent busy since boot (``/proc/stat``'s
    per-core lines: user, nice, system, irq, softirq, steal); None off Linux."""
    try:
        cores = {f"cpu{core}" for core in os.sched_getaffinity(0)}
        with open("/proc/stat") as stat:
            lines = [line.split() for line in stat if line.startswith("cpu")]
    except (OSError, AttributeError):
        return None
    ticks = 0
    for fields in lines:
        if fields[0] in cores and len(fields) >= 9:
            user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[1:9])
            ticks += user + nice + system + irq + softirq + steal
    return ticks / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds() -> float:
    """This process's CPU time (all threads, user and system)."""
    times = os.times()
    return times.user + times.system


def others_share(busy_seconds: float, own_cpu_seconds: float, seconds: float, cores: int) -> float | None:
    """Share of ``cores`` that other processes used over ``seconds``: the cores' busy time less
    this process's own CPU time. None for an empty interval."""
    if seconds <= 0 or cores <= 0:
        return None
    return min(1.0, max(0.0, (busy_seconds - own_cpu_seconds) / (seconds * cores)))


def reads_from(loader: object) -> str:
    """Where a Loader's storage reads go, in words ("" for anything else)."""
    storage = getattr(loader, "storage", None)
    if storage is None:
        return ""
    describe = getattr(storage, "describe", None)
    name = describe() if callable(describe) else type(storage).__name__
    if getattr(storage, "is_remote", False):
        return f"over the network, {name}"
    if any(isinstance(getattr(storage, field, None), (str, os.PathLike)) for field in ("root", "path", "paths")):
        return f"from local disk, {name}"
    return f"from {name}"
