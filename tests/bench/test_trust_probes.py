"""benchmarks/trust/probes.py, the hostile-input probes of issue 72, runs its cheap probes here:
each ends in an outcome (a result or an exception), never a signal or a hang, none of them is a
silent wrong result (a header sent to another origin, a victim's file removed, other bytes), and
each holds: the right result or an error of stoker's own. Against the commit before issue 72 all
13 fail (signals, raw errors, wrong results)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_cheap_hostile_input_probes_end_in_an_outcome_never_a_signal_or_a_hang(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "trust" / "probes.py"), "--quick", "--json", str(tmp_path / "probes.json")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| # | probe | after: outcome | time | peak RSS |" in done.stdout, done.stdout[-3000:]
    results = json.loads((tmp_path / "probes.json").read_text())
    assert len(results) >= 10, sorted(results)
    for name, row in results.items():
        outcome = row["after"]["outcome"]
        assert not outcome.startswith(("signal", "hang", "exit")), f"{name}: {outcome}"
        assert not outcome.startswith("wrong:"), f"{name}: {outcome}"
        assert row["after"]["verdict"] == "held", f"{name}: {outcome}"  # and no raw error
