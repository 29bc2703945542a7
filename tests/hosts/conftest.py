"""The multi-host tests' network: hosts made of network namespaces (tests/support/hosts.py),
skipped with the reason where they cannot be made (not root), and required in CI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.availability import unavailable
from tests.support.hosts import HostNetwork
from tests.support.hosts import unavailable as hosts_unavailable


@pytest.fixture
def hosts() -> Iterator[type[HostNetwork]]:
    """`HostNetwork` where namespaces can be made here; the test skips (fails in CI) otherwise."""
    reason = hosts_unavailable()
    if reason is not None:
        unavailable("hosts as network namespaces", reason)
    yield HostNetwork
