"""Fetch every server the tests start, ahead of them: ``python -m stoker_testbed.servers.prepare``.

`make test` runs this behind its install phase (niced, in the background). On a machine whose
cache is empty, each server is otherwise fetched by the first test that needs it, in the middle
of the busiest part of the run: Cassandra's jars by Maven, Azurite by npm, the s3proxy jar from
Maven Central, fake-gcs-server built from its Go source (about 140 s of CPU). Fetched here, their
downloads overlap the native build, which keeps the cores busy anyway.

Each server is fetched on a thread of its own (they mostly wait on the network). A failure is
printed and left for the test that needs the server, which fetches again under the same install
lock and fails there naming the cause; this script always exits 0 so that it never stops a run.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from stoker_testbed.servers.azurite_server import azurite_blob_command
from stoker_testbed.servers.cassandra_server import cassandra_jars
from stoker_testbed.servers.gcs_server import fake_gcs_server_binary
from stoker_testbed.servers.s3_server import s3proxy_jar

__all__ = ["FETCHES", "prepare_servers"]

FETCHES: dict[str, Callable[[], object]] = {
    "s3proxy (S3)": s3proxy_jar,
    "Cassandra": cassandra_jars,
    "Azurite (Azure)": azurite_blob_command,
    "fake-gcs-server (GCS)": fake_gcs_server_binary,
}


def prepare_servers(fetches: dict[str, Callable[[], object]] = FETCHES) -> dict[str, str]:
    """Run every fetch side by side; returns each server's outcome, in the order of ``fetches``:
    "ready in N s", or why not (the error, or "did not finish" where its thread ended otherwise)."""
    outcomes: dict[str, str] = {}
    lock = threading.Lock()  # guards outcomes: each thread writes its own key

    def fetch(name: str, call: Callable[[], object]) -> None:
        started = time.monotonic()
        try:
            call()
            outcome = f"ready in {time.monotonic() - started:.0f} s"
        except BaseException as error:  # noqa: BLE001 - reported (SystemExit too); the test that needs it fails with the cause
            outcome = f"not fetched ({_describe(error)})"
        with lock:
            outcomes[name] = outcome

    threads = [threading.Thread(target=fetch, args=item, name=f"fetch {item[0]}", daemon=True) for item in fetches.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with lock:
        return {name: outcomes.get(name, "did not finish") for name in fetches}


def _describe(error: BaseException) -> str:
    """``Type: message``, at most 500 characters, even where the error's own ``str`` fails."""
    try:
        message = str(error)
    except Exception:  # noqa: BLE001 - a message that cannot be made is named as such
        message = "(its message could not be made)"
    return f"{type(error).__name__}: {message}"[:500]


if __name__ == "__main__":
    for name, outcome in prepare_servers().items():
        print(f"{name}: {outcome}", file=sys.stderr)
