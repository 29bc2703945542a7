"""The native classes called from several threads at once: a lock inside one never deadlocks with
the interpreter, and what it counts stays exact."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Run in a process of its own: a deadlock holds the GIL, so no timeout in this process could end it.
_PACKER_UNDER_THREADS = textwrap.dedent(
    """
    import gc, sys, threading
    import numpy as np
    from stoker._native import TokenPacker

    sys.setswitchinterval(1e-6)
    gc.set_threshold(50)  # collections inside the packer's calls, often

    class Garbage:
        # Collected inside whichever call allocates next; its finalizer runs Python code, where
        # the interpreter may hand the GIL to another thread.
        def __init__(self):
            self.cycle = self

        def __del__(self):
            for _ in range(50):
                pass

    packer = TokenPacker(64)
    documents, length = 20000, 16
    done = threading.Event()
    taken = [0]

    def push():
        tokens = np.arange(length, dtype=np.uint32)
        for number in range(documents):
            packer.push_many(tokens, np.array([length], dtype=np.uint64), number)
        done.set()

    def read_state():
        while not done.is_set():
            Garbage(); Garbage()
            packer.state()

    def take():  # keeps the rows few, so that each state() is quick
        while not done.is_set():
            Garbage()
            packer.ready_rows
            batch = packer.take_batch(8, 0)
            taken[0] += 0 if batch is None else len(batch["input_ids"])

    threads = [threading.Thread(target=push), threading.Thread(target=read_state), threading.Thread(target=take)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    packer.finish()
    counters = packer.counters
    assert counters["documents"] == documents and counters["tokens_in"] == documents * length, counters
    assert taken[0] + packer.ready_rows == counters["rows"], (taken, packer.ready_rows, counters)
    print("ok")
    """
)


def test_a_packer_shared_by_threads_never_deadlocks_and_counts_every_document() -> None:
    # Once: `state()` made its Python objects holding the packer's lock, and the other calls
    # waited for that lock holding the GIL: a collection inside `state()` that ran a finalizer
    # let another thread take the GIL and wait for the lock, and neither could go on.
    try:
        finished = subprocess.run([sys.executable, "-c", _PACKER_UNDER_THREADS], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("the threads sharing a TokenPacker were still stuck after 60 s (a deadlock)") from None
    assert finished.returncode == 0 and finished.stdout.strip() == "ok", finished.stderr[-2000:]
