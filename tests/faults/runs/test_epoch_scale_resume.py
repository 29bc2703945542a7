"""An epoch of ten million samples killed mid-way resumes exactly: the checkpoint is a few hundred
bytes, the resumed run delivers the rest, and `verify_epoch` proves each sample once across the
kill (the batches delivered after the checkpoint and lost with the process come again)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from stoker import Loader
from stoker_testbed.data.synthetic import SyntheticStorage, free_decode

SAMPLES = 10**7
BATCH = 4096

RUN = textwrap.dedent(
    f"""
    import json, os, signal, sys
    from stoker import Loader
    from stoker_testbed.data.synthetic import SyntheticStorage, free_decode

    loader = Loader(SyntheticStorage({SAMPLES}), batch_size={BATCH}, decode=free_decode)
    for step, batch in enumerate(loader):
        if step == 1200:
            with open(sys.argv[1], "w") as file:
                json.dump(loader.state_dict(), file)
        if step == 1250:
            os.kill(os.getpid(), signal.SIGKILL)  # 50 batches after the checkpoint, lost
    """
)


def test_a_killed_ten_million_sample_epoch_resumes_and_verifies(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    done = subprocess.run([sys.executable, "-c", RUN, str(state_file)], capture_output=True, text=True, timeout=600)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert state_file.stat().st_size < 2048, "the checkpoint does not grow with what was delivered"
    state = json.loads(state_file.read_text())
    spans = state["sampler"]["delivered"]
    delivered = sum(end - start for start, end in spans)
    # 1,201 batches, delivered as they completed (a batch may overtake another): a few spans.
    assert delivered == 1201 * BATCH and len(spans) <= 4, spans
    resumed = Loader(SyntheticStorage(SAMPLES), batch_size=BATCH, decode=free_decode)
    resumed.load_state_dict(state)
    rest = sum(len(batch.keys) for batch in resumed)
    assert rest == SAMPLES - delivered
    assert resumed.verify_epoch() == {"epoch": 0, "samples": SAMPLES, "delivered": SAMPLES, "excluded": 0, "removed": 0, "added": 0}
