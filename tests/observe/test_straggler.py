"""The straggler of a synchronous job named in words: the verdict from ranks' figures (which rank,
which cause, none when nothing differs), the figures' checks when another process sends them, and
`StragglerWatch` gathering them over a real two-rank gloo group (tests/distributed/straggler_job.py,
on loopback). tests/hosts/test_straggler_hosts.py shapes real hosts: a slow link, a CPU hog, a
slow disk."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.observe import RankFigures, StageFigures, straggler_verdict

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "distributed" / "straggler_job.py"


def rank(number: int, wait: float, fetch: float = 0.01, decode: float = 0.002, cpu: float | None = 0.05, host: str = "") -> RankFigures:
    stages = (StageFigures("fetch", 100, 100 * fetch), StageFigures("decode", 100, 100 * decode))
    return RankFigures(number, host or f"h{number}", 10.0, 10.0 * wait, 100, stages, cpu, "over the network, s3://b/d")


def test_a_rank_with_slow_reads_is_named_with_where_its_reads_go() -> None:
    verdict = straggler_verdict([rank(0, 0.02), rank(1, 0.31, fetch=0.034), rank(2, 0.03), rank(3, 0.02)])
    assert verdict == (
        "rank 1 (host h1) waits for data 31% of its steps, the others 2%: its storage reads (over the network, s3://b/d) "
        "take 3.4x the others' median time per item; the others wait for it at every step"
    )


def test_a_rank_whose_cores_other_processes_take_is_named_for_it_before_the_stage_it_slows() -> None:
    verdict = straggler_verdict([rank(0, 0.02), rank(1, 0.4, decode=0.008, cpu=0.7)])
    assert verdict is not None
    assert "rank 1 (host h1)" in verdict
    assert "other processes on host h1 use 70% of the cores it may run on, on the others' hosts 5%: its CPU is taken" in verdict
    assert "(its decode stage takes 4.0x" in verdict


def test_no_verdict_when_no_rank_stands_out_or_there_is_one() -> None:
    assert straggler_verdict([rank(number, 0.02 + number / 100) for number in range(4)]) is None
    assert straggler_verdict([rank(0, 0.4), rank(1, 0.3)]) is None, "all wait: the data is slow for all, no straggler"
    assert straggler_verdict([rank(0, 0.11), rank(1, 0.03), rank(2, 0.02)]) is None, "3x the others but 8 points: noise"
    assert straggler_verdict([rank(0, 0.5)]) is None, "one rank holds no one back"
    assert straggler_verdict([]) is None


@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=16), st.floats(0.0, 1.0), st.floats(0.001, 1.0))
def test_identical_figures_never_name_a_straggler(ranks_waits: list[float], wait: float, fetch: float) -> None:
    assert straggler_verdict([rank(number, wait, fetch) for number in range(len(ranks_waits))]) is None


def test_figures_round_trip_and_a_peers_bad_bytes_are_refused() -> None:
    figures = rank(3, 0.2, cpu=None)
    assert RankFigures.from_json(figures.to_json()) == figures
    good = json.loads(figures.to_json())
    for field, bad in [("seconds", -1), ("seconds", float("inf")), ("steps", "many"), ("stages", [["fetch", 1]]), ("host", 7)]:
        with pytest.raises(ValueError, match="not a rank's straggler figures"):
            RankFigures.from_json(json.dumps({**good, field: bad}).encode())
    with pytest.raises(ValueError, match="bytes"):
        RankFigures.from_json(b" " * (1 << 20))


@given(st.binary(max_size=512))
def test_any_bytes_are_figures_or_a_value_error(data: bytes) -> None:
    try:
        RankFigures.from_json(data)
    except ValueError:
        pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_job(tmp_path: Path, per_rank: list[list[str]], *, log: list[str] | None = None) -> dict:
    pytest.importorskip("torch.distributed")
    out = tmp_path / "verdicts.json"
    port = str(free_port())
    ranks = []
    for number, options in enumerate(per_rank):
        environment = {
            **os.environ, "RANK": str(number), "WORLD_SIZE": str(len(per_rank)), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": "lo", "PYTHONPATH": str(ROOT),
        }  # fmt: skip
        ranks.append(subprocess.Popen([sys.executable, str(JOB), str(out), *options], env=environment, stderr=subprocess.PIPE, text=True))
    errors = [process.communicate(timeout=300)[1] for process in ranks]
    assert [process.returncode for process in ranks] == [0] * len(ranks), "\n".join(errors)[-4000:]
    if log is not None:
        log.extend(errors)
    return json.loads(out.read_text())


def test_the_watch_names_the_rank_whose_store_is_slow_at_the_end_of_the_epoch(tmp_path: Path) -> None:
    result = run_job(tmp_path, [["--samples", "960"], ["--samples", "960", "--read-delay", "0.03"]])
    verdict = result["verdicts"][-1]
    assert verdict is not None and verdict.startswith("rank 1 ("), result
    assert "its storage reads (from SlowMemory) take " in verdict, verdict
    assert [figures["rank"] for figures in result["figures"]] == [0, 1]


def test_the_watch_names_no_one_when_the_ranks_are_alike(tmp_path: Path) -> None:
    result = run_job(tmp_path, [["--samples", "960", "--interval", "0.25"]] * 2)
    assert len(result["verdicts"]) >= 2, "verdicts within the epoch and at its end"
    assert result["verdicts"] == [None] * len(result["verdicts"]), result
