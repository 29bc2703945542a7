"""`stoker.torch.DataLoader` interrupted for real: Ctrl-C while an item is stuck in the dataset's
code, with worker processes and with worker threads. The training process ends promptly with
KeyboardInterrupt and leaves no worker behind. (Errors, dead workers and timeouts are compared
with torch's in tests/torch/test_differential_iteration.py.)"""

from __future__ import annotations

import os
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from stoker_testbed.interrupts import interrupt_when_stuck

pytest.importorskip("torch")


STUCK_ITEM = textwrap.dedent(
    """
    import sys, threading, time
    from stoker.torch import DataLoader

    class Stuck:
        # Items of the third batch on never return, as a read from a hung mount does.
        def __len__(self):
            return 64

        def __getitem__(self, index):
            if index >= 16:
                threading.Event().wait()
            return index

    loader = DataLoader(Stuck(), batch_size=8, num_workers=2, worker_kind=sys.argv[1])
    try:
        for batch in loader:
            print("batch", int(batch[0]), flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
        sys.exit(3)
    """
)


def _processes_with(marker: str) -> list[int]:
    """Processes whose command line holds ``marker`` (forked workers keep their parent's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("worker_kind", ["processes", "threads"])
def test_ctrl_c_with_an_item_stuck_in_the_dataset_ends_the_run_and_its_workers(worker_kind: str) -> None:
    marker = f"stoker-test-{uuid.uuid4().hex}"
    # The loop waits on the third batch, whose items never return, once it has printed two.
    ended = interrupt_when_stuck(STUCK_ITEM, [worker_kind, marker], ["batch 0\n", "batch 8\n"])
    assert ended.returncode == 3, ended.errors
    assert ended.seconds_to_react is not None and ended.seconds_to_react < 5.0, "a hang guard, not a speed target"
    deadline = time.monotonic() + 20
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_with(marker), f"workers left behind: {_processes_with(marker)} (pid {os.getpid()} is the test)"


SEGFAULT = textwrap.dedent(
    """
    import ctypes, sys
    from stoker.torch import DataLoader

    class Segfault:
        # PyTorch's own test_segfault dataset: every item reads address 0.
        def __len__(self):
            return 10

        def __getitem__(self, index):
            return ctypes.string_at(0)

    loader = DataLoader(Segfault(), batch_size=2, num_workers=2, persistent_workers=sys.argv[1] == "persistent")
    try:
        next(iter(loader))
    except RuntimeError as error:
        print(error, flush=True)
    """
)


@pytest.mark.parametrize("workers", ["plain", "persistent"])
def test_a_worker_killed_by_sigsegv_is_told_in_torchs_words(workers: str) -> None:
    import re
    import subprocess

    done = subprocess.run([sys.executable, "-c", SEGFAULT, workers], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # The pattern PyTorch's test_dataloader.py::test_segfault matches (plain and persistent workers).
    assert re.search(r"DataLoader worker \(pid \d+\) is killed by signal: ", done.stdout), done.stdout
    assert "Segmentation fault" in done.stdout and "was killed by signal SIGSEGV" in done.stdout
