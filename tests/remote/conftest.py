"""Real servers for the network-storage tests: s3proxy and Cassandra 5.0 on loopback, started once
per test session. Without java (or Maven for Cassandra) the tests skip on a laptop and fail in
CI, where ``STOKER_REQUIRE_SERVERS`` is set."""

from __future__ import annotations

import itertools
import os
import random
from collections import Counter
from collections.abc import Iterator

import pytest

from stoker.loader import Loader
from stoker.storage import CassandraConnection, MemoryStorage
from tests.support.availability import started
from tests.support.cassandra_server import CassandraServer
from tests.support.s3_server import S3Server

_names = itertools.count()


def dataset(count: int = 120, classes: int = 3, seed: int = 0) -> MemoryStorage:
    """Random payloads named like an ImageFolder, labelled by class."""
    generator = random.Random(seed)
    samples = {f"class_{index % classes}/{index:05d}.jpg": generator.randbytes(generator.randint(200, 4000)) for index in range(count)}
    return MemoryStorage(samples, {key: int(key.split("/")[0][-1]) for key in samples})


def epoch_contents(loader: Loader, truth: dict[str, bytes]) -> Counter[str]:
    """How many times one epoch of ``loader`` delivered each key, checking every sample's bytes
    against ``truth``."""
    seen: Counter[str] = Counter()
    for batch in loader:
        for key, data in zip(batch.keys, batch.data):
            assert data == truth[key]
            seen[key] += 1
    return seen


def unique(prefix: str) -> str:
    """A fresh bucket, prefix or keyspace name for one test."""
    return f"{prefix}{next(_names)}x{os.getpid()}"


@pytest.fixture(scope="session")
def cassandra_server() -> Iterator[CassandraServer]:
    server = started(CassandraServer(), "the Cassandra test server (needs java and mvn)")
    yield server
    server.close()


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    name = unique("bucket-")
    s3_server.create_bucket(name)
    return name


@pytest.fixture
def keyspace_connection(cassandra_server: CassandraServer) -> CassandraConnection:
    return CassandraConnection(
        hosts=[cassandra_server.host],
        port=cassandra_server.port,
        keyspace=unique("ks_").replace("-", "_"),
        username=cassandra_server.username,
        password=cassandra_server.password,
    )
