"""Whether this interpreter has a global interpreter lock (GIL), asked in one place.

With a GIL, Python code in threads runs one thread at a time: a pipeline stage of pure-Python work
keeps at most one core busy however many threads it has, and each thread spends the rest of its
time waiting for the lock (which its own CPU clock reads as waiting, like I/O). The live tuner
(`stoker.pipeline.Tuner`) and the bottleneck diagnosis (`stoker.observe.diagnose`) ask this
before they read a stage that way. A free-threaded build (3.13t, 3.14t: PEP 703, PEP 779) runs
such threads in parallel, so there the same figures mean something else.

Asked at each use, not once at import: a free-threaded interpreter turns the GIL back on when an
extension module that needs it is imported (or with ``PYTHON_GIL=1``).
"""

from __future__ import annotations

import sys

__all__ = ["gil_enabled"]


def gil_enabled() -> bool:
    """Whether the GIL is enabled now.

    Returns:
        ``sys._is_gil_enabled()`` where the interpreter has it (CPython 3.13 and later: False on a
        free-threaded build running without the GIL), True otherwise (every older interpreter has
        one).
    """
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
    return True if is_gil_enabled is None else bool(is_gil_enabled())


# Tasks running on average for a stage to take turns at all (one task takes no turns).
_TAKING_TURNS = 1.5
# Cores a stage's tasks keep busy together (their CPU seconds per second) that read as one core.
_ONE_CORE_LOW = 0.8
_ONE_CORE_HIGH = 1.2
# Cores the whole process may keep busy for its threads still to run one at a time.
_ONE_PROCESS_CORE = 1.3


def held_by_the_gil(running: float, cores: float, process_cores: float | None) -> bool:
    """Whether a stage's figures say its threads take turns on the GIL: several of its tasks run at
    once, yet together they keep about one core busy (each on the CPU only its share of the time:
    a thread waiting for the GIL sleeps), and the whole process keeps no more than that busy. Such
    a stage is held to one core's worth: more threads only take more turns. Never on a
    free-threaded build (`gil_enabled` False), where the same figures mean threads that wait on
    something else.

    Args:
        running: The stage's tasks running on average.
        cores: The cores they kept busy together (their CPU seconds per second).
        process_cores: The cores the whole process kept busy, or None where not measured.

    Returns:
        Whether the stage is held by the GIL.
    """
    if not gil_enabled() or running < _TAKING_TURNS or not _ONE_CORE_LOW <= cores <= _ONE_CORE_HIGH:
        return False
    return process_cores is None or process_cores <= _ONE_PROCESS_CORE
