"""`stoker top`'s page fetch against a hostile metrics endpoint: a page that trickles a byte
every half second ends at the fetch's deadline (it held the whole tool past 90 s when each read
had its own timeout), a redirect loop and a page over the limit are named; each is the `OSError`
that `stoker top` shows beside the URL, and the other endpoints go on."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("prometheus_client")

from stoker.observe._top import scrape  # noqa: E402
from stoker_testbed.servers.hostile_http import Answer, HostileHttpServer  # noqa: E402

HANG = 60.0
"""Seconds after which a fetch counts as hanging (a bound on hangs, not a speed target: the
trickle below lasts 200 s)."""


@pytest.fixture
def server() -> Iterator[HostileHttpServer]:
    with HostileHttpServer() as hostile:
        yield hostile


def _fetch(url: str, timeout: float) -> BaseException | None:
    """What `scrape` raised (None: nothing), run in a thread that must end within `HANG`."""
    outcome: list[BaseException | None] = []

    def fetch() -> None:
        try:
            scrape(url, timeout=timeout)
            outcome.append(None)
        except BaseException as error:  # judged below
            outcome.append(error)

    thread = threading.Thread(target=fetch, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), f"the fetch of {url} is still running after {HANG:.0f} s"
    return outcome[0]


def test_a_page_that_trickles_ends_at_the_deadline_named(server: HostileHttpServer) -> None:
    server.answer("metrics", Answer(b"200 OK", (("Content-Length", "400"),), b"x" * 400, piece=1, pause=0.5))
    error = _fetch(server.url("metrics"), timeout=1.0)
    assert isinstance(error, OSError) and "deadline" in str(error) and server.url("metrics") in str(error), error


def test_a_redirect_loop_and_an_oversized_page_are_named(server: HostileHttpServer) -> None:
    server.answer("loop", Answer(b"302 Found", (("Location", "/loop"),)))
    server.answer("big", Answer(b"200 OK", (), b"", endless=True))
    looped = _fetch(server.url("loop"), timeout=5.0)
    assert isinstance(looped, OSError) and f"{server.url('loop')}: a redirect loop" in str(looped), looped
    big = _fetch(server.url("big"), timeout=30.0)
    assert isinstance(big, OSError) and f"{server.url('big')}: over 4 MiB" in str(big), big
