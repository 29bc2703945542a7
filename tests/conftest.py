"""Shared fixtures: every test must leave no stoker thread behind."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest


def stoker_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("stoker-")]


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves pipeline threads running after it returns."""
    before = set(stoker_threads())
    yield
    # A pipeline dropped inside the test is stopped by its finalizer; give the collector a turn.
    import gc

    gc.collect()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        leaked = [thread for thread in stoker_threads() if thread not in before]
        if not leaked:
            return
        time.sleep(0.05)
    pytest.fail(f"threads left running: {[thread.name for thread in leaked]}")
