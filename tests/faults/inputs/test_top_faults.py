"""`stoker top` against endpoints that are not a stoker loader's: a page that is not metrics, an
endless page, a server that never answers, figures no loader writes (NaN, Inf, a superscript
digit or 5,000 digits as a rank), and text meant for the terminal (ESC and BEL in label values
and in an HTTP reason phrase). Each endpoint is named as unreachable or unreadable with why, in
bounded time and memory, the others are shown, and nothing reaches the terminal raw."""

from __future__ import annotations

import http.server
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

STOKER = str(Path(sys.executable).with_name("stoker"))
# What a terminal acts on: C0 but newline, DEL, C1, and the bidi controls.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# A loader's page, as serve_metrics writes one, with ``{rank}``, ``{stage}``, ``{value}`` and
# ``{where}`` put in.
PAGE = """# TYPE stoker_stage_items_total counter
stoker_stage_items_total{{rank="{rank}",stage="{stage}"}} {value}
stoker_stage_busy_seconds_total{{rank="{rank}",stage="{stage}"}} 1.5
stoker_run_seconds_total{{rank="{rank}"}} 10
stoker_data_wait_seconds_total{{rank="{rank}"}} 1
stoker_reads_from{{rank="{rank}",reads_from="{where}"}} 1
"""
PAGES = {
    "/good": PAGE.format(rank="0", stage="decode", value="12", where="from local disk"),
    # The terminal's title rewritten, its screen cleared, a bell: from label values.
    "/escapes": PAGE.format(rank="1", stage="\x1b]0;owned\x07decode", value="12", where="\x1b[2J\x1b[Hdisk\u202etxt.exe"),
    "/nan": PAGE.format(rank="2", stage="decode", value="NaN", where="disk"),
    "/inf": PAGE.format(rank="3", stage="decode", value="+Inf", where="disk"),
    "/superscript": PAGE.format(rank="\u00b2", stage="decode", value="1", where="disk"),
    "/digits": PAGE.format(rank="9" * 5000, stage="decode", value="1", where="disk"),
}


class Hostile(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/reason":  # a reason phrase that clears the screen and rings
            self.send_response(503, "\x1b[2J\x1b]0;owned\x07Unavailable")
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()
        if self.path == "/garbage":
            self.wfile.write(b'stoker_step{rank="0" 12 not a metric line\n\x00\xff')
        elif self.path in PAGES:
            self.wfile.write(PAGES[self.path].encode())
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
    assert done.returncode == 1, "no endpoint gave a loader's figures"
    assert "no loader's figures at any of the 3 endpoint(s) (2 unreachable, 1 unreadable)" in done.stderr, done.stderr
    assert f"{hostile_server}/garbage: unreadable (not Prometheus text" in done.stdout, done.stdout
    assert f"{hostile_server}/endless: unreachable (" in done.stdout and "over 4 MiB" in done.stdout, done.stdout
    assert f"{silent_url}: unreachable (" in done.stdout and "timed out" in done.stdout, done.stdout


def _top_once(*urls: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([STOKER, "top", "--once", "--interval", "0.2", *urls], capture_output=True, text=True, timeout=60)


def test_text_from_pages_and_servers_reaches_the_terminal_escaped(hostile_server: str) -> None:
    done = _top_once(f"{hostile_server}/escapes", f"{hostile_server}/reason")
    assert done.returncode == 0, done.stderr
    assert RAW_CONTROL.search(done.stdout) is None, repr(done.stdout)
    assert "\\x1b]0;owned\\x07decode" in done.stdout, done.stdout  # the stage, shown and readable
    assert f"{hostile_server}/reason: unreachable (" in done.stdout and "\\x1b[2J\\x1b]0;owned\\x07Unavailable" in done.stdout, done.stdout


def test_figures_no_loader_writes_name_their_endpoint_unreadable_and_the_others_are_shown(hostile_server: str) -> None:
    bad = ["nan", "inf", "superscript", "digits"]
    done = _top_once(f"{hostile_server}/good", *(f"{hostile_server}/{name}" for name in bad))
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert f"rank 0  {hostile_server}/good" in done.stdout and "  decode " in done.stdout, done.stdout
    assert f"{hostile_server}/nan: unreadable (" in done.stdout and "is nan" in done.stdout, done.stdout
    assert f"{hostile_server}/inf: unreadable (" in done.stdout and "is inf" in done.stdout, done.stdout
    assert f"{hostile_server}/superscript: unreadable (" in done.stdout and "is not a rank" in done.stdout, done.stdout
    assert f"{hostile_server}/digits: unreadable (" in done.stdout, done.stdout
    assert all(len(line) <= 120 for line in done.stdout.splitlines()), "each line within the screen's width"
