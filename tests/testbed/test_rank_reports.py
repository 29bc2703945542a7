"""`rank_reports`, which collects a multi-host job's ranks: every rank's output read as it comes,
and a failed rank ends the job instead of leaving the others waiting for it at a barrier."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stoker_testbed.hosts import rank_reports


def _python(code: str, *arguments: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


WAITS_FOR = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.01)\nprint('[0]')\n"


def test_a_rank_writing_more_than_a_pipe_holds_does_not_block_the_one_read_first(tmp_path: Path) -> None:
    # Rank 0 waits for rank 1 (a barrier); rank 1 writes 1 MB of warnings first. Read one after
    # the other, rank 1 blocked on its full pipe and rank 0 waited for it to the timeout.
    mark = str(tmp_path / "barrier")
    noisy = "import sys\nsys.stderr.write('warning\\n' * 131072)\nsys.stderr.flush()\nopen(sys.argv[1], 'w').close()\nprint('[1]')\n"
    processes = [_python(WAITS_FOR, mark), _python(noisy, mark)]
    assert rank_reports(processes, timeout=120) == [[0], [1]]


def test_a_failed_rank_ends_the_job_and_is_named(tmp_path: Path) -> None:
    waiting = _python(WAITS_FOR, str(tmp_path / "never"))
    failing = _python("import sys\nsys.stderr.write('boom: the rank broke\\n')\nsys.exit(3)\n")
    with pytest.raises(SystemExit, match=r"rank 1 failed \(exit status 3\)[\s\S]*boom: the rank broke"):
        rank_reports([waiting, failing], timeout=600)
    assert waiting.poll() is not None, "the rank left waiting for it was ended"


def test_ranks_past_the_timeout_are_killed(tmp_path: Path) -> None:
    waiting = _python(WAITS_FOR, str(tmp_path / "never"))
    with pytest.raises(SystemExit, match="ran past 1 s"):
        rank_reports([waiting], timeout=1)
    assert waiting.poll() is not None
