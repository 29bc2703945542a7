"""`make test` fetches every server ahead of the tests (stoker_testbed.servers.prepare): each
fetch runs, side by side, and one that fails is reported by name without stopping the others."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from stoker_testbed.servers import prepare
from stoker_testbed.servers.server import ServerError

ROOT = Path(__file__).resolve().parents[2]


def test_every_fetch_runs_side_by_side_and_a_failure_is_reported_not_raised() -> None:
    started: list[str] = []
    both_running = threading.Barrier(2, timeout=10)  # breaks (and fails the fetch) unless both run at once

    def slow(name: str) -> object:
        started.append(name)
        both_running.wait()
        return name

    def broken() -> object:
        raise ServerError("mvn could not fetch cassandra-all")

    def exits() -> object:
        raise SystemExit(3)

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no message")

    def unprintable() -> object:
        raise Unprintable()

    fetches = {
        "first": lambda: slow("first"),
        "broken": broken,
        "exits": exits,
        "unprintable": unprintable,
        "second": lambda: slow("second"),
    }
    outcomes = prepare.prepare_servers(fetches)
    assert sorted(started) == ["first", "second"]
    assert list(outcomes) == list(fetches), "every server reported, in order"
    assert outcomes["first"].startswith("ready in ") and outcomes["second"].startswith("ready in "), outcomes
    assert outcomes["broken"] == "not fetched (ServerError: mvn could not fetch cassandra-all)"
    assert outcomes["exits"] == "not fetched (SystemExit: 3)"
    assert outcomes["unprintable"] == "not fetched (Unprintable: (its message could not be made))"


def test_every_server_the_tests_start_is_fetched() -> None:
    # The four fetchers the servers themselves use (each under its install lock), not copies.
    from stoker_testbed.servers import azurite_server, cassandra_server, gcs_server, s3_server

    assert set(prepare.FETCHES.values()) == {
        s3_server.s3proxy_jar,
        cassandra_server.cassandra_jars,
        azurite_server.azurite_blob_command,
        gcs_server.fake_gcs_server_binary,
    }


def test_the_script_reports_every_server_and_exits_zero_with_no_tools_on_the_path(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stoker_testbed.servers.prepare"],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": str(tmp_path),
            "STOKER_SERVER_CACHE": str(tmp_path / "cache"),
            "PYTHONPATH": str(ROOT / "testbed"),
            "STOKER_MAVEN_REPOSITORY": "http://127.0.0.1:9",
        },  # nothing listens on the discard port
    )
    assert done.returncode == 0, done.stderr
    for name in prepare.FETCHES:
        assert f"{name}: not fetched" in done.stderr, done.stderr
