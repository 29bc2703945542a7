"""Memory a benchmark step takes (Linux): resident memory now, with the peak reset to it, and
the peak since, so that a step's peak is measured apart from an earlier step's."""

from __future__ import annotations

import resource

__all__ = ["peak_mib", "resident_mib"]


def resident_mib() -> float:
    """Resident memory now, in MiB; the peak is reset to it (``clear_refs``), so `peak_mib`
    afterwards is the most a later step took, not an earlier one's peak."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / (1 << 20)


def peak_mib() -> float:
    """The most resident memory since the last `resident_mib` (or the process's start), in MiB."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
