"""`stoker top` shows running loaders from their metrics endpoints: per-stage rates, busy slots,
queue fill, the data-wait share, a bottleneck verdict, and the straggler among several ranks;
it refreshes in place in a terminal and quits on q (driven here through tmux, its screen read)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from stoker.observe._top import Endpoint, Scrape, _status, refresh, render, straggler, top  # noqa: E402
from stoker_testbed.availability import unavailable  # noqa: E402

STOKER = str(Path(sys.executable).with_name("stoker"))

SERVE = textwrap.dedent(
    """
    import sys, time
    from stoker import Loader
    from stoker.bench import image_folder
    from stoker.observe import serve_metrics
    from stoker.ops import ImageTransform

    loader = Loader(str(image_folder(200, 160, 120)), batch_size=8, transform=ImageTransform(resize_shorter=64, center_crop=(56, 56)))
    with serve_metrics(loader, port=0) as server:
        print(server.port, flush=True)
        while True:
            for batch in loader:
                time.sleep(0.02)
    """
)


@pytest.fixture
def running_loader() -> Iterator[str]:
    """A Loader iterating in another process, its metrics URL."""
    process = subprocess.Popen([sys.executable, "-c", SERVE], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        assert port.isdigit(), "the loader process did not start"
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        process.kill()
        process.wait()


def test_one_refresh_names_each_stage_and_a_verdict(running_loader: str) -> None:
    time.sleep(1.0)
    done = subprocess.run(
        [STOKER, "top", "--once", running_loader, "http://127.0.0.1:1/metrics"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    screen = done.stdout
    assert f"rank 0  {running_loader}" in screen and "batches/s" in screen and "data wait" in screen
    for stage in ("sampler", "fetch", "decode"):
        assert f"  {stage} " in screen, screen
    assert "http://127.0.0.1:1/metrics: unreachable" in screen, "a dead endpoint is named, the others still shown"
    assert "straggler: none" in screen


def endpoint(rank: str, wait: float, decode_seconds_per_item: float) -> Endpoint:
    return Endpoint(f"http://h{rank}:9464/metrics", rank, wait, 10.0, [("decode", 10.0, 0.9, 0.0, decode_seconds_per_item)], 0)


def test_the_straggler_is_the_rank_that_waits_with_its_slow_stage_and_none_when_nothing_differs() -> None:
    ranks = [endpoint("0", 0.02, 0.010), endpoint("1", 0.03, 0.011), endpoint("2", 0.31, 0.034), endpoint("3", 0.02, 0.010)]
    verdict = straggler(ranks)
    assert verdict is not None
    assert verdict.startswith("rank 2 (host h2) waits for data 31% of its steps, the others 2%: its decode stage takes 3.4x"), verdict
    assert straggler([endpoint(str(rank), 0.02 + rank / 100, 0.010) for rank in range(4)]) is None
    assert straggler([endpoint("0", 0.5, 0.01)]) is None, "one rank has no one to hold back"


def test_it_refreshes_in_place_in_a_terminal_and_quits_on_q(running_loader: str) -> None:
    if shutil.which("tmux") is None:
        unavailable("tmux (to drive stoker top in a terminal)", "not installed")
    session = f"stoker-top-{time.monotonic_ns()}"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "30", STOKER, "top", "--interval", "0.5", running_loader],
        check=True,
    )
    try:
        screens = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(screens) < 2:
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout
            if "decode" in screen and "batches/s" in screen and (not screens or screen != screens[-1]):
                screens.append(screen)
            time.sleep(0.3)
        assert len(screens) == 2, "no screen that refreshes: " + (screens[-1] if screens else "nothing drawn")
        assert screens[-1].splitlines()[0].startswith("stoker top: 1 loader(s)"), "drawn in place from the top line"
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and subprocess.run(["tmux", "has-session", "-t", session], capture_output=True).returncode == 0:
            time.sleep(0.2)
        assert subprocess.run(["tmux", "has-session", "-t", session], capture_output=True).returncode != 0, "q did not quit"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_a_straggler_whose_cores_other_processes_take_is_named_for_it_from_the_endpoints() -> None:
    def page(at: float, wait: float, busy: float, cpu: float) -> Scrape:
        rank = (("rank", "0"),)
        return Scrape(
            at,
            {
                ("stoker_run_seconds_total", rank): at,
                ("stoker_data_wait_seconds_total", rank): wait,
                ("stoker_cores_busy_seconds_total", rank): busy,
                ("stoker_process_cpu_seconds_total", rank): cpu,
                ("stoker_cores", rank): 2.0,
                ("stoker_reads_from", (("rank", "0"), ("reads_from", "from local disk, files at /data"))): 1.0,
            },
        )

    # 10 s on 2 cores: the first rank's cores 18 s busy of which 2 s its own; the second's 4 s, 3 s its own.
    hogged = Endpoint.between("http://h1:9464/metrics", page(0.0, 0.0, 0.0, 0.0), page(10.0, 4.0, 18.0, 2.0))
    calm = Endpoint.between("http://h0:9464/metrics", page(0.0, 0.0, 0.0, 0.0), page(10.0, 0.1, 4.0, 3.0))
    assert hogged.others_cpu_share == pytest.approx(0.8) and calm.others_cpu_share == pytest.approx(0.05)
    assert hogged.reads_from == "from local disk, files at /data"
    verdict = straggler([calm, hogged])
    assert verdict is not None and "host h1" in verdict and "other processes on host h1 use 80% of the cores it may run on" in verdict


def test_a_long_verdict_wraps_at_the_width_and_keeps_every_word() -> None:
    slow = endpoint("0", 0.4, 0.010)  # waits 40% with decode 90% busy: a bottleneck verdict with advice
    said = slow.bottleneck()
    for width in (40, 60, 80):
        lines = render([slow], width)
        assert all(len(line) <= width for line in lines), lines
        assert " ".join(said.split()) in " ".join(" ".join(lines).split()), f"the whole verdict, to its last word: {lines}"


def test_exit_status_is_1_when_no_endpoint_gives_figures_and_0_when_one_does(capsys: pytest.CaptureFixture[str]) -> None:
    dead = ["http://127.0.0.1:1/metrics", "http://127.0.0.1:9/metrics"]
    shown: list[str] = []
    assert top(dead, interval=0.1, once=True, write=shown.append) == 1
    assert sum("unreachable" in line for line in shown) == 2
    assert "stoker top: no loader's figures at any of the 2 endpoint(s) (2 unreachable)" in capsys.readouterr().err

    def one_alive(url: str) -> Scrape:
        if url == dead[0]:
            raise OSError("connection refused")
        return Scrape(time.monotonic(), {("stoker_run_seconds_total", (("rank", "0"),)): 1.0})

    assert _status(refresh(dead, {}, fetch=one_alive)) == 0
