"""The peers `stoker bench` and `benchmarks/images/end_to_end.py` compare with, each run in its own
process (``python -m stoker.bench._peers METHOD OUTPUT ROOT``) so peak RSS and CPU time are its
own. The loaders themselves are in `_peer_loaders`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from ._peer_loaders import (
    BATCH,
    MEAN,
    OUTPUTS,
    STD,
    Arrivals,
    process_cpu_seconds,
    run_dali,
    run_spdl,
    run_stoker,
    run_thread_pool,
    run_torch,
)
from ._run import thin

__all__ = ["BATCH", "MEAN", "OUTPUTS", "PEERS", "SCALING", "STD", "Arrivals", "available_peers", "run_in_subprocess"]

CEILING = "ThreadPool(2) simplejpeg/OpenCV INTER_LINEAR"

PEERS: dict[str, Callable[[Path, str], Arrivals]] = {
    "stoker.Loader": run_stoker,
    "PyTorch DataLoader (2 workers)": lambda root, output: run_torch(root, output, workers=2),
    "PyTorch DataLoader (4 workers)": lambda root, output: run_torch(root, output, workers=4),
    "SPDL + simplejpeg/OpenCV INTER_LINEAR": lambda root, output: run_spdl(root, output, "INTER_LINEAR"),
    "SPDL + simplejpeg/OpenCV INTER_AREA": lambda root, output: run_spdl(root, output, "INTER_AREA"),
    "SPDL + spdl.io": lambda root, output: run_spdl(root, output, "spdl.io"),
    "DALI (CPU pipeline)": run_dali,
    CEILING: run_thread_pool,
}
"""Every method, by the name tables show. The DataLoader runs torchvision's PIL recipe; SPDL's
OpenCV resizes are INTER_LINEAR (fastest, aliased when shrinking) and INTER_AREA (antialiased,
like stoker and torchvision); DALI runs its CPU pipeline (no GPU here: ``device_id=None``); the
last row is a bare thread pool with no pipeline at all."""

SCALING: dict[str, Callable[[Path, str, int], Arrivals]] = {
    "stoker.Loader": lambda root, output, cores: run_stoker(root, output),
    "PyTorch DataLoader": lambda root, output, cores: run_torch(root, output, workers=cores),
    "SPDL + simplejpeg/OpenCV INTER_AREA": lambda root, output, cores: run_spdl(root, output, "INTER_AREA", threads=cores),
    "DALI (CPU pipeline)": lambda root, output, cores: run_dali(root, output),
}
"""The methods of the scaling curve (`benchmarks/images/scaling.py`), each given the cores its
process may use: stoker and DALI find them themselves (a thread per usable core); the
DataLoader gets a worker per core and SPDL a load stage that wide, as their users would set."""

_REQUIRES = {
    "PyTorch DataLoader (2 workers)": ("torch", "torchvision"),
    "PyTorch DataLoader (4 workers)": ("torch", "torchvision"),
    "SPDL + simplejpeg/OpenCV INTER_LINEAR": ("spdl.pipeline", "simplejpeg", "cv2"),
    "SPDL + simplejpeg/OpenCV INTER_AREA": ("spdl.pipeline", "simplejpeg", "cv2"),
    "SPDL + spdl.io": ("spdl.pipeline", "spdl.io"),
    "DALI (CPU pipeline)": ("nvidia.dali",),
    CEILING: ("simplejpeg", "cv2"),
    "PyTorch DataLoader": ("torch", "torchvision"),
}


def available_peers(methods: Iterable[str] = PEERS) -> dict[str, str | None]:
    """Each of ``methods`` (default: `PEERS`; or `SCALING`'s) and why it cannot run here (None
    when it can)."""
    import importlib.util

    def missing(module: str) -> bool:
        top = importlib.util.find_spec(module.split(".")[0])
        if top is None:
            return True
        if top.origin is None and "." in module:  # a namespace package (nvidia.*): says nothing of its parts
            return importlib.util.find_spec(module) is None
        return False

    reasons: dict[str, str | None] = {}
    for name in methods:
        absent = [module for module in _REQUIRES.get(name, ()) if missing(module)]
        reasons[name] = f"not installed: {', '.join(absent)}" if absent else None
    return reasons


def run_in_subprocess(
    name: str, root: Path, output: str = "uint8", timeout: float = 1800, cores: int | None = None, interpreter: str | None = None
) -> dict[str, Any]:
    """Run one method over one epoch of ``root`` in a fresh process; its measurements as a dict.
    With ``cores``, a method of `SCALING` in a process allowed the first ``cores`` cores only
    (``taskset``'s affinity mask, set in the child before anything starts). With
    ``interpreter``, the process is that Python (another build, e.g. a free-threaded one, with
    stoker installed), not this one.

    Returns:
        ``images_per_second`` (the epoch, from building the loader to its last batch: start-up
        included, imports not), ``first_batch_seconds``, ``peak_rss_mb``,
        ``cpu_seconds_per_image`` and ``cpu_percent`` (over the same span, workers included)
        and thinned ``arrivals``.

    Raises:
        RuntimeError: The method failed or delivered nothing; the message gives its first error
            line (a peer may log per-sample errors and go on) and how it ended.
    """
    if output not in OUTPUTS:
        raise ConfigurationError(f"output must be one of {OUTPUTS}, got {output!r}")
    command = [interpreter or sys.executable, "-m", "stoker.bench._peers", name, output, str(root)] + (
        [str(cores)] if cores is not None else []
    )
    process = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if process.returncode != 0:
        lines = process.stderr.strip().splitlines() or ["no output"]
        first_error = next((line.strip() for line in lines if re.match(r"\s*[\w.]+(Error|Exception): ", line)), None)
        ending = lines[-1].strip()
        reason = ending if first_error is None or first_error == ending else f"{ending}; first error: {first_error[:200]}"
        raise RuntimeError(f"{name}: {reason}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def _child(name: str, output: str, root: Path, cores: int | None = None) -> None:
    import os

    from ._memory import PeakMemory

    if cores is not None:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])  # before any thread or worker starts
    with PeakMemory() as peak:
        arrivals = PEERS[name](root, output) if cores is None else SCALING[name](root, output, cores)
    if arrivals.count == 0:  # e.g. every sample failed inside a pipeline that logs and drops them
        sys.exit("delivered no images")
    seconds = arrivals.times[-1][0]
    cpu = process_cpu_seconds() - arrivals.cpu_at_start
    print(
        json.dumps(
            {
                "images_per_second": arrivals.rate,
                "first_batch_seconds": arrivals.first,
                "peak_rss_mb": peak.megabytes,
                "cpu_seconds_per_image": cpu / arrivals.count,
                "cpu_percent": 100 * cpu / seconds,
                "arrivals": thin(arrivals.times),
            }
        )
    )


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None)
