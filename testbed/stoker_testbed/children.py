"""Each side of a benchmark in a child process of its own: its peak memory and its imports are
its own, and one that cannot run is left out with the reason, never shown as 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any


def run_sides(
    script: str, sides: Sequence[str], arguments: Sequence[str], environment: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Run ``script --child SIDE *arguments`` for each side; each prints its result as one JSON
    line last. Returns the results of the sides that ran; each that did not is printed as left
    out, with the last line of its error."""
    results: dict[str, dict[str, Any]] = {}
    for side in sides:
        done = subprocess.run(
            [sys.executable, script, "--child", side, *arguments], capture_output=True, text=True, env={**os.environ, **(environment or {})}
        )
        if done.returncode != 0:
            print(f"{side}: left out, it did not run ({done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode})")
            continue
        results[side] = json.loads(done.stdout.strip().splitlines()[-1])
    return results
