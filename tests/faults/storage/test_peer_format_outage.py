"""A peer's dataset on an object store or a web server that goes away mid-epoch (S3, GCS and
Azure emulators, a plain HTTP server; each a server of its own): MDS shards read by range keep
every sample exactly once, all real data, while the server is down for 10 s and back."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from stoker import Loader
from stoker.loader import Sampling
from stoker.storage import open_storage
from stoker_testbed.availability import started
from stoker_testbed.data.peer_formats import random_samples, write_mds
from stoker_testbed.servers.azurite_server import AzuriteServer
from stoker_testbed.servers.gcs_server import GcsServer
from stoker_testbed.servers.http_server import HttpFileServer
from stoker_testbed.servers.s3_server import S3Server
from stoker_testbed.servers.server import ServerProcess

pytest.importorskip("streaming", reason="MDS shards are written by MosaicML Streaming: pip install mosaicml-streaming")

SERVERS: dict[str, type[ServerProcess]] = {"s3": S3Server, "gs": GcsServer, "az": AzuriteServer, "http": HttpFileServer}


@pytest.fixture(params=sorted(SERVERS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, ServerProcess, list[tuple[bytes, int]]]]:
    samples = random_samples(300, seed=21)
    folder = write_mds(tmp_path / "mds", samples, size_limit=100_000)
    server: ServerProcess = started(SERVERS[request.param](), f"the {request.param} test server")
    try:
        if not isinstance(server, HttpFileServer):
            server.create_bucket("outage")  # type: ignore[attr-defined]
        for path in sorted(folder.iterdir()):
            if isinstance(server, HttpFileServer):
                server.put(f"outage/mds/{path.name}", path.read_bytes())
            elif isinstance(server, S3Server):
                server.client().put_object(Bucket="outage", Key=f"mds/{path.name}", Body=path.read_bytes())
            else:
                server.put("outage", f"mds/{path.name}", path.read_bytes())  # type: ignore[attr-defined]
        yield request.param, server, samples
    finally:
        server.close()


def test_an_outage_mid_epoch_over_mds_shards_is_ridden_out(
    store: tuple[str, ServerProcess, list[tuple[bytes, int]]], caplog: pytest.LogCaptureFixture
) -> None:
    kind, server, samples = store
    url, options = (server.url("outage/mds/"), {}) if isinstance(server, HttpFileServer) else (f"{kind}://outage/mds", server.options())  # type: ignore[attr-defined]
    with open_storage(url, timeout=5, **options) as storage:
        loader = Loader(storage, batch_size=16, decode=bytes, sampling=Sampling(seed=1))
        got: Counter[bytes] = Counter()
        restart: threading.Timer | None = None
        with caplog.at_level("WARNING", logger="stoker.storage"):
            for number, batch in enumerate(loader):
                assert batch.valid.all() and not batch.replaced.any()
                got.update(batch.data)
                if number == 2:
                    server.stop()
                    restart = threading.Timer(10.0, server.start)
                    restart.start()
        assert restart is not None
        restart.join()
        loader.close()
        assert got == Counter(payload for payload, _ in samples)
        assert storage.stats()["retries"] + storage.stats()["overloads"] > 0
    said = [
        record.getMessage()
        for record in caplog.records
        if "reachable for" in record.getMessage() or "reachable again" in record.getMessage()
    ]
    assert said, "the outage and the recovery are said in the log"
    print(f"{kind}: {said[-1]}")  # the closing note quotes one line per store
