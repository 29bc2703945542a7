"""Storage cost accounting: the requests a Loader's epoch sent, by kind, counted by stoker and
checked against the S3 test server's own request log; bytes, the price estimate, and the line at
the end of the epoch."""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from stoker import Loader
from stoker.loader import Reads, Sampling
from stoker.storage import PRICE_TABLES, PriceTable, S3Storage
from stoker_testbed.availability import started
from stoker_testbed.servers.s3_server import S3Server

_REQUEST = re.compile(r"request: .*\{(GET|HEAD|PUT|POST|DELETE)@\w+ http://[^/]+/(\S*) HTTP")


@pytest.fixture(scope="module")
def logged_server() -> Iterator[S3Server]:
    """An s3proxy of its own that logs every request (its debug log)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOG_LEVEL", "debug")
        server = started(S3Server(), "the S3 test server (s3proxy, needs java)")
    yield server
    server.close()


def server_requests(server: S3Server, bucket: str) -> Counter[str]:
    """GET and LIST requests to ``bucket`` in the server's log (a LIST is a GET with list-type)."""
    time.sleep(0.5)  # the log is written by another process
    counts: Counter[str] = Counter()
    for line in server.log_path.read_text(errors="replace").splitlines():
        found = _REQUEST.search(line)
        if found is None or not found.group(2).startswith(bucket):
            continue
        method, target = found.groups()
        counts["LIST" if method == "GET" and "list-type=" in target else method] += 1
    return counts


def test_an_epochs_requests_match_the_servers_log(logged_server: S3Server, caplog: pytest.LogCaptureFixture) -> None:
    logged_server.create_bucket("costs")
    client = logged_server.client()
    samples = {f"c{index % 2}/{index:03d}.jpg": bytes([index]) * (1000 + index) for index in range(60)}
    for key, data in samples.items():  # no manifest: opening lists the prefix
        client.put_object(Bucket="costs", Key=f"listed/{key}", Body=data)
    before_open = server_requests(logged_server, "costs")
    storage = S3Storage("s3://costs/listed", **logged_server.options())
    opened = server_requests(logged_server, "costs")
    assert storage.traffic.snapshot()["requests"] == {
        kind: opened[kind] - before_open[kind] for kind in ("GET", "LIST") if opened[kind] - before_open[kind]
    }, "opening: the manifest probes (GET) and the listing (LIST) as the server saw them"
    assert opened["LIST"] - before_open["LIST"] == 1
    loader = Loader(storage, batch_size=8, sampling=Sampling(seed=2), reads=Reads(hedge=False))
    with caplog.at_level(logging.INFO, logger="stoker.loader"):
        delivered = sum(len(batch.keys) for batch in loader)
    assert delivered == 60
    after = server_requests(logged_server, "costs")
    epoch = loader.stats().storage  # type: ignore[union-attr]
    assert epoch["requests"] == {"GET": after["GET"] - opened["GET"]}, "the epoch's GETs as the server saw them"
    # One GET a sample, and the next epoch's first samples asked for before this one ends.
    assert epoch["requests"]["GET"] >= 60
    assert epoch["bytes_read"] >= sum(map(len, samples.values()))
    assert epoch["retries"] == 0
    assert epoch["cost"]["dollars"] == pytest.approx(epoch["requests"]["GET"] * 0.0004 / 1000)
    assert epoch["cost"]["prices"] == PRICE_TABLES["aws-s3-standard"].name
    gets = epoch["requests"]["GET"]
    assert f"epoch 0 from s3://costs/listed: {gets} GET; 0.1 MB read; 0 retries; about $0.0000 at AWS S3 Standard" in caplog.text
    storage.close()


def test_a_price_table_of_ones_own() -> None:
    mine = PriceTable("my store", get_per_thousand=1.0, list_per_thousand=10.0, egress_per_gigabyte=0.05, as_of="2026-11")
    traffic = {"requests": {"GET": 1500, "ranged GET": 500, "LIST": 2}, "bytes_read": 2 * 10**9, "cache_bytes": {}}
    assert mine.cost(traffic) == pytest.approx(2.0 + 0.02 + 0.1)
    with pytest.raises(ValueError, match="prices must be .store., one of"):
        Reads(prices="my store")
