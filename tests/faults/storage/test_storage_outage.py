"""Network storage going away under a running Loader, against the real servers (S3, Google Cloud
Storage and Azure emulators, Cassandra): stopped mid-epoch
and restarted (every sample exactly once, all real data), and stopped for good (one clear error
after the deadline, and a resume that reads what was not delivered).

Before: a 10 s outage of S3 zero-filled 92 of 300 samples and recorded them as delivered, and a
dead server made every batch zeros without an error."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from stoker import Loader
from stoker.ingest import upload_to_cassandra, upload_to_s3
from stoker.loader import Sampling
from stoker.storage import (
    CassandraConnection,
    CassandraStorage,
    MemoryStorage,
    RemoteStorage,
    RetryPolicy,
    StorageUnavailableError,
    open_storage,
)
from stoker_testbed.availability import started
from stoker_testbed.data.datasets import dataset
from stoker_testbed.servers.azurite_server import AzuriteServer
from stoker_testbed.servers.cassandra_server import CassandraServer
from stoker_testbed.servers.gcs_server import GcsServer
from stoker_testbed.servers.s3_server import S3Server
from stoker_testbed.servers.server import ServerProcess

SAMPLES = 300


SERVERS: dict[str, type[ServerProcess]] = {"s3": S3Server, "gs": GcsServer, "az": AzuriteServer, "cassandra": CassandraServer}


@pytest.fixture(scope="module", params=["s3", "gs", "az", "cassandra"])
def store(request: pytest.FixtureRequest) -> Iterator[tuple[str, ServerProcess, MemoryStorage]]:
    """A server of its own (the tests stop it) holding a 300-sample dataset."""
    source = dataset(SAMPLES)
    server: ServerProcess = started(SERVERS[request.param](), f"the {request.param} test server")
    try:
        if isinstance(server, S3Server):
            server.create_bucket("outage")
            upload_to_s3(source, "s3://outage/d", progress=False, decode_check=False, **server.options())
        elif isinstance(server, (GcsServer, AzuriteServer)):  # one object per sample, put as the store's own tools would
            server.create_bucket("outage")
            for key, data in zip(source.keys, source.read_many(source.keys)):
                server.put("outage", f"d/{key}", data)
        else:
            upload_to_cassandra(source, connection(server), progress=False, decode_check=False)
        yield request.param, server, source
    finally:
        server.close()


def connection(server: CassandraServer) -> CassandraConnection:
    return CassandraConnection(
        hosts=[server.host], port=server.port, keyspace="outage", username=server.username, password=server.password, request_timeout=5
    )


def open_store(kind: str, server: ServerProcess, retry: RetryPolicy | None = None) -> RemoteStorage:
    if kind in ("s3", "gs", "az"):
        assert isinstance(server, (S3Server, GcsServer, AzuriteServer))
        return open_storage(f"{kind}://outage/d", retry=retry, timeout=5, **server.options())  # type: ignore[return-value]
    assert isinstance(server, CassandraServer)
    return CassandraStorage(connection(server), retry=retry)


def test_an_outage_mid_epoch_is_ridden_out(store: tuple[str, ServerProcess, MemoryStorage], caplog: pytest.LogCaptureFixture) -> None:
    kind, server, source = store
    truth = dict(zip(source.keys, source.read_many(source.keys)))
    with open_store(kind, server) as storage:  # the default policy: retried up to 180 s per sample
        loader = Loader(storage, batch_size=16, sampling=Sampling(seed=1))
        got: list[str] = []
        restart: threading.Timer | None = None
        with caplog.at_level("WARNING", logger="stoker.storage"):
            for number, batch in enumerate(loader):
                assert batch.valid.all() and not batch.replaced.any()
                for key, data in zip(batch.keys, batch.data):
                    assert data == truth[key]
                got.extend(batch.keys)
                if number == 2:
                    server.stop()
                    restart = threading.Timer(10.0, server.start)
                    restart.start()
        assert restart is not None
        restart.join()
        assert Counter(got) == Counter(source.keys)
        assert loader.failures == [] and storage.stats()["retries"] + storage.stats()["overloads"] > 0
    # Said in the log: a sample unreachable for a while, or the store reachable again after the
    # outage (a run whose reads were mostly in flight when it began may only say the latter).
    assert any("unreachable for" in record.getMessage() or "reachable again" in record.getMessage() for record in caplog.records)


def test_a_store_down_for_good_raises_and_resumes_exactly(store: tuple[str, ServerProcess, MemoryStorage]) -> None:
    kind, server, source = store
    quick = RetryPolicy(deadline=4.0, max_delay=0.5)
    got: list[str] = []
    with open_store(kind, server, quick) as storage:
        loader = Loader(storage, batch_size=16, sampling=Sampling(seed=2))
        started = 0.0
        with pytest.raises(StorageUnavailableError) as caught:
            for number, batch in enumerate(loader):
                assert batch.valid.all()
                got.extend(batch.keys)
                if number == 3:
                    # Killed, as a lost machine goes: a graceful stop (Cassandra drains for seconds)
                    # would let the prefetch fetch the rest of the epoch first on a loaded machine.
                    server.kill()
                    started = time.monotonic()
        waited = time.monotonic() - started
        error = caught.value
        assert "unavailable" in str(error) and error.samples and error.seconds >= 3.0
        assert error.store == f"{kind}://outage/d" if kind != "cassandra" else error.store.startswith("cassandra://")
        assert waited < 120  # the deadline, not forever
        state = loader.state_dict()
        assert sum(end - start for start, end in state["sampler"]["delivered"]) == len(got)
    server.start()
    with open_store(kind, server) as storage:
        resumed = Loader(storage, batch_size=16, sampling=Sampling(seed=2))
        resumed.load_state_dict(state)
        got.extend(key for batch in resumed for key in batch.keys)
    assert Counter(got) == Counter(source.keys)


def test_retry_deadlines_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert RetryPolicy().deadline == 180.0 and RetryPolicy().for_opening().deadline == 30.0
    monkeypatch.setenv("STOKER_RETRY_DEADLINE", "600")
    assert RetryPolicy().deadline == 600.0 and RetryPolicy().for_opening().deadline == 30.0
    monkeypatch.setenv("STOKER_RETRY_DEADLINE", "soon")
    with pytest.raises(ValueError, match="STOKER_RETRY_DEADLINE"):
        RetryPolicy()
