"""Stress fixtures: threads switched between almost any two bytecodes, so that a read-modify-write
or a pair of reads that only the GIL's long turns kept together comes apart here, as it would on a
free-threaded build."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def switch_often() -> Iterator[None]:
    """The interpreter's switch interval at its least (1 microsecond) for the test, restored
    after."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
