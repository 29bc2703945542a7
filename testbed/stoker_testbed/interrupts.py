"""Ctrl-C for real, for the fault tests: run a script until it has printed what it prints before
it gets stuck, press Ctrl-C (SIGINT), and see how it ended."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]


class Interrupted(NamedTuple):
    """How an interrupted script ended."""

    returncode: int
    output: str
    errors: str
    seconds_to_react: float | None
    """From the SIGINT to the time the script printed after ``interrupted `` (None if it did not)."""


def interrupt_when_stuck(script: str, arguments: list[str], lines_before: list[str], settle: float = 0.5) -> Interrupted:
    """Run ``python -c script *arguments`` from the repository root; once it has printed
    ``lines_before`` and ``settle`` seconds have passed (it is stuck by then), send SIGINT.

    Raises:
        AssertionError: The script printed something else first.
        subprocess.TimeoutExpired: It did not end within 60 s of the SIGINT.
    """
    process = subprocess.Popen(
        [sys.executable, "-c", script, *arguments], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert [process.stdout.readline() for _ in lines_before] == lines_before
        time.sleep(settle)
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        output, errors = process.communicate(timeout=60)
    finally:
        process.kill()
    reacted = float(output.split("interrupted ")[1]) - sent if "interrupted " in output else None
    return Interrupted(process.returncode, output, errors, reacted)
