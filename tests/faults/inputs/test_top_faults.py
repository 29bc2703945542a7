"""`stoker top` against endpoints that are not a stoker loader's: a page that is not metrics, an
endless page, a server that never answers. Each is named as unreachable with why, in bounded time
and memory, and the run goes on."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

STOKER = str(Path(sys.executable).with_name("stoker"))


class Hostile(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()
        if self.path == "/garbage":
            self.wfile.write(b'stoker_step{rank="0" 12 not a metric line\n\x00\xff')
        elif self.path == "/endless":
            try:
                chunk = b"# " + b"x" * 65_534 + b"\n"
                while True:
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                return

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_pages_that_are_not_a_loaders_metrics_are_named_and_passed_over(hostile_server: str) -> None:
    silent = socket.socket()  # accepts the connection, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    silent_url = f"http://127.0.0.1:{silent.getsockname()[1]}/metrics"
    try:
        done = subprocess.run(
            [STOKER, "top", "--once", "--interval", "0.2", f"{hostile_server}/garbage", f"{hostile_server}/endless", silent_url],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        silent.close()
    assert done.returncode == 0, done.stderr
    assert f"{hostile_server}/garbage: unreachable" in done.stdout, done.stdout
    assert f"{hostile_server}/endless: unreachable (" in done.stdout and "over 4 MiB" in done.stdout, done.stdout
    assert f"{silent_url}: unreachable (" in done.stdout and "timed out" in done.stdout, done.stdout
