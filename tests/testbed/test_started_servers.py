"""A server whose start is cut short (pytest-timeout's failure, Ctrl-C) is closed, never left
running for the rest of the run; one that cannot start is closed and named."""

from __future__ import annotations

import pytest

from stoker_testbed.availability import started
from stoker_testbed.servers.server import ServerError


class Interrupted(BaseException):
    """Stands for pytest-timeout's Failed or KeyboardInterrupt: not an Exception."""


class Recorded:
    def __init__(self, failure: BaseException) -> None:
        self.failure = failure
        self.closed = 0

    def start(self) -> None:
        raise self.failure

    def close(self) -> None:
        self.closed += 1


def test_a_start_cut_short_closes_what_it_launched() -> None:
    server = Recorded(Interrupted())
    with pytest.raises(Interrupted):
        started(server, "a test server")
    assert server.closed == 1


def test_a_server_that_cannot_start_is_closed_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STOKER_REQUIRE_SERVERS", raising=False)
    server = Recorded(ServerError("exited while starting"))
    with pytest.raises(pytest.skip.Exception, match="a test server is not available here: exited while starting"):
        started(server, "a test server")
    assert server.closed == 1
