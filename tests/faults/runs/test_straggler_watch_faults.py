"""`StragglerWatch` when a rank leaves the job early (a ``break``, a crash): the others'
gathering fails, the watch warns once naming the rank that could not gather, gives no verdict
from it, and the run goes on to its end: no hang (tests/distributed/straggler_job.py, two ranks
on loopback)."""

from __future__ import annotations

from pathlib import Path

from tests.observe.test_straggler import run_job


def test_a_rank_that_leaves_early_stops_the_watch_with_a_warning_not_a_hang(tmp_path: Path) -> None:
    errors: list[str] = []
    result = run_job(tmp_path, [["--no-sync", "--timeout", "20"], ["--no-sync", "--stop-after", "5", "--timeout", "20"]], log=errors)
    assert result["verdicts"] == [], "no verdict from a gathering that failed"
    assert "stoker straggler: stopped watching; rank 0 could not gather every rank's figures" in errors[0], errors[0][-3000:]
