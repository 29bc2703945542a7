"""A training process interrupted for real: Ctrl-C while a storage read is stuck, and kill -9
followed by a resume from the last checkpoint (every sample exactly once)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from stoker_testbed.interrupts import interrupt_when_stuck

ROOT = Path(__file__).resolve().parents[3]

STUCK_READ = textwrap.dedent(
    """
    import sys, threading, time
    from stoker import Loader
    from stoker.storage import MemoryStorage

    class Stuck(MemoryStorage):
        # Reads of batch 3 and later block inside the storage call, as a hung mount or socket does.
        def _read_indices(self, indices):
            if min(indices) >= 24:
                threading.Event().wait()
            return super()._read_indices(indices)

    loader = Loader(Stuck({f"k{i}": bytes(4) for i in range(64)}), batch_size=8, shuffle=False, in_order=True)
    try:
        for batch in loader:
            print("batch", batch.index, flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
        sys.exit(3)
    """
)


def test_ctrl_c_returns_promptly_with_a_read_stuck_in_storage() -> None:
    # The loop waits on batch 3, whose read never returns, once it has printed batches 0 to 2.
    ended = interrupt_when_stuck(STUCK_READ, [], ["batch 0\n", "batch 1\n", "batch 2\n"])
    assert ended.returncode == 3, ended.errors
    # Before: the stop waited 10 s for the stuck read. Now it leaves that thread behind (a
    # daemon, with a warning) after a fraction of a second. A hang guard, not a speed target.
    assert ended.seconds_to_react is not None and ended.seconds_to_react < 5.0, ended.errors
    errors = ended.errors
    assert "still inside an op" in errors


TRAIN = textwrap.dedent(
    """
    import json, os, sys, time
    from stoker import Loader
    from stoker.storage import MemoryStorage

    checkpoint, resume = sys.argv[1], sys.argv[2] == "resume"
    storage = MemoryStorage({f"k{i}": i.to_bytes(4, "little") for i in range(3000)})
    loader = Loader(storage, batch_size=10, seed=7, fetch_concurrency=4)
    seen = []
    if resume:
        saved = json.load(open(checkpoint))
        loader.load_state_dict(saved["loader"])
    for number, batch in enumerate(loader):
        seen.extend(batch.keys)
        # A training step, then a checkpoint every 5 batches: written whole, then renamed.
        time.sleep(0.002)
        if number % 5 == 4 and not resume:
            with open(checkpoint + ".tmp", "w") as file:
                json.dump({"loader": loader.state_dict(), "keys": seen}, file)
            os.replace(checkpoint + ".tmp", checkpoint)
            print("checkpoint", number, flush=True)
    if resume:
        print(json.dumps(seen), flush=True)
    """
)


def test_kill_9_then_resume_delivers_every_sample_exactly_once(tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "checkpoint.json")
    process = subprocess.Popen([sys.executable, "-c", TRAIN, checkpoint, "train"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        for _ in range(20):  # 20 checkpoints: 100 batches in, with more in flight
            assert process.stdout.readline().startswith("checkpoint")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    finally:
        process.kill()
    assert process.returncode == -signal.SIGKILL
    saved = json.loads(Path(checkpoint).read_text())
    before = saved["keys"]
    resumed = subprocess.run([sys.executable, "-c", TRAIN, checkpoint, "resume"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    after = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert len(before) >= 1000
    assert sorted(before + after) == sorted(f"k{i}" for i in range(3000))
