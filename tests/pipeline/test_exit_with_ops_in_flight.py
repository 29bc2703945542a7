"""A script that ends while a stopped pipeline's workers are still inside their ops (a quick stop
waits 0.4 s for them): the interpreter's exit waits for the ops in progress (bounded), so none is
unwound mid-op; inside native code that is what can crash a process whose script ended well (an
autotune benchmark run ended with SIGSEGV so, its workers still inside their ops)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from stoker.pipeline import PipelineBuilder

    folder = Path(sys.argv[1])

    def op(index):
        (folder / f"started-{index}").touch()
        time.sleep(1.0)  # the op the exit finds in progress
        (folder / f"ended-{index}").touch()
        return index

    pipeline = PipelineBuilder().add_source(range(100)).pipe(op, concurrency=2).add_sink(1).build()
    iterator = iter(pipeline)
    next(iterator)
    while len(list(folder.glob("started-*"))) < 3:  # the next ops are in progress
        time.sleep(0.01)
    pipeline.stop(timeout=0.05)  # stopped, its workers left inside their ops (as a quick stop does)
    print("script ends", flush=True)
    """
)


def test_the_exit_waits_for_the_ops_in_progress_and_starts_no_more(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "script ends" in done.stdout, done.stderr[-2000:]
    started = {path.name.split("-")[1] for path in tmp_path.glob("started-*")}
    ended = {path.name.split("-")[1] for path in tmp_path.glob("ended-*")}
    assert started == ended, f"ops cut off at exit: started {sorted(started)}, ended {sorted(ended)}"
    assert len(started) < 10, "the exit let the workers go on with queued ops"
