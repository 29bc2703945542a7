"""Real servers the tests need: skipped with the reason on a laptop, a failure in CI (where
``STOKER_REQUIRE_SERVERS`` is set, so a missing server can never pass as a skip)."""

from __future__ import annotations

import os
from typing import NoReturn, Protocol, TypeVar

import pytest

from stoker_testbed.servers.server import ServerError

__all__ = ["started", "unavailable"]


class _Startable(Protocol):
    def start(self) -> None: ...

    def close(self) -> None: ...


Server = TypeVar("Server", bound=_Startable)


def unavailable(what: str, error: object) -> NoReturn:
    """Skip (or, in CI, fail) saying ``what`` is not available here and why."""
    message = f"{what} is not available here: {error}"
    if os.environ.get("STOKER_REQUIRE_SERVERS"):
        pytest.fail(message + " (STOKER_REQUIRE_SERVERS is set: CI must run these tests)")
    pytest.skip(message)


def started(server: Server, what: str) -> Server:
    """``server`` started, or the test skipped (failed in CI) naming ``what``."""
    try:
        server.start()
    except (ServerError, OSError) as error:
        server.close()
        unavailable(what, error)
    except BaseException:
        # pytest-timeout's failure or Ctrl-C in the middle of a start: the processes launched so
        # far go too (five Cassandra JVMs of a 3-node cluster whose start ran past the test's
        # 300 s were left running for the rest of a CI run, each a heap and a core's share).
        server.close()
        raise
    return server
