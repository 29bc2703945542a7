"""A web server that does not serve byte ranges (``python -m http.server`` answers a ranged GET
with the whole file) is not an outage: stoker says so once, fetches each shard whole once into a
local copy, and reads every sample from there, this epoch and the next, and the next open. Before,
every read was refused (or retried for minutes, with obstore's client) and the epoch ended in an
error."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from stoker import Loader
from stoker.errors import StorageError
from stoker.ingest import convert_storage
from stoker.loader import Sampling
from stoker.storage import HTTPStorage, open_storage
from stoker.storage.policies import WholeFiles
from stoker_testbed.availability import started
from stoker_testbed.data.datasets import dataset, epoch_contents
from stoker_testbed.servers.http_server import StdlibFileServer

pytest.importorskip("aiohttp")

NO_RANGES = "does not serve byte ranges"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """Tar shards as `stoker convert` writes them, sidecars beside them, and each sample's bytes."""
    folder = tmp_path_factory.mktemp("published")
    source = dataset(150)
    convert_storage(source, folder / "shards", shard_size=40_000, progress=False, decode_check=False)
    truth = {key.rsplit(".", 1)[0]: value for key, value in zip(source.keys, source.read_many(source.keys))}
    return folder / "shards", truth


@pytest.fixture
def server(published: tuple[Path, dict[str, bytes]]) -> Iterator[StdlibFileServer]:
    plain = started(StdlibFileServer(published[0]), "python -m http.server")
    yield plain
    plain.close()


def _brace_url(server: StdlibFileServer, folder: Path) -> tuple[str, list[str]]:
    names = sorted(path.name for path in folder.glob("*.tar"))
    stem, width = names[0].rsplit("-", 1)[0], len(names[0].rsplit("-", 1)[1]) - len(".tar")
    return server.url(f"{stem}-{{{0:0{width}d}..{len(names) - 1:0{width}d}}}.tar"), names


def _shard_gets(server: StdlibFileServer) -> Counter[str]:
    return Counter(path.lstrip("/") for path in server.requests("GET") if path.endswith(".tar"))


@pytest.mark.parametrize("sidecars", [True, False], ids=["with-sidecars", "webdataset-style"])
def test_each_shard_is_fetched_whole_once_and_every_sample_read_from_its_copy(
    sidecars: bool, server: StdlibFileServer, published: tuple[Path, dict[str, bytes]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder, truth = published
    url, names = _brace_url(server, folder)
    if not sidecars:  # a shard without one is fetched to be indexed: that fetch is its copy
        for idx in folder.glob("*.idx"):
            idx.rename(tmp_path / idx.name)
    try:
        with caplog.at_level(logging.WARNING, logger="stoker.storage"), open_storage(url) as storage:
            loader = Loader(storage, batch_size=16, decode=bytes, sampling=Sampling(shuffle="uniform", seed=3))
            try:
                for _ in range(2):  # the second epoch reads the copies: no request
                    assert epoch_contents(loader, truth) == Counter(dict.fromkeys(truth, 1))
            finally:
                loader.close()
    finally:
        for idx in tmp_path.glob("*.idx"):
            idx.rename(folder / idx.name)
    warnings = [record.getMessage() for record in caplog.records if NO_RANGES in record.getMessage()]
    assert len(warnings) == 1 and server.url("")[:-1] in warnings[0] and "python -m http.server" in warnings[0], warnings
    gets = _shard_gets(server)
    # Each shard fetched whole once; one more GET, of one shard, asked whether the server serves
    # ranges (its answer, the whole file, is cut off unread).
    assert set(gets) == set(names) and sum(gets.values()) <= len(names) + 1, gets
    with open_storage(url) as again:  # a later open (another run on the machine): the copies, no fetch
        assert dict(zip(again.keys, again.read_many(list(again.keys)))) == truth
    assert sum(_shard_gets(server).values()) - sum(gets.values()) <= 1, "only the question whether it serves ranges"


def test_a_manifests_shards_on_a_server_without_ranges_are_found_out_by_the_first_read_alone(
    server: StdlibFileServer, published: tuple[Path, dict[str, bytes]]
) -> None:
    # A folder URL with stoker's dataset.json: no HEAD says anything before the first sample's
    # ranged GET. Every sample is asked for at once; only the first goes to the server until it
    # answers, with the whole file, so the others read the copies.
    folder, truth = published
    names = sorted(path.name for path in folder.glob("*.tar"))
    with open_storage(server.url("")) as storage:
        assert isinstance(storage, HTTPStorage) and storage.layout == "shards"
        keys = list(storage.keys)
        assert dict(zip(keys, storage.read_many(keys))) == truth
    gets = _shard_gets(server)
    assert set(gets) == set(names) and sum(gets.values()) <= len(names) + 1, gets


def test_a_file_over_the_whole_file_limit_is_refused_by_name(tmp_path: Path) -> None:
    import asyncio

    whole = WholeFiles(tmp_path, "http://127.0.0.1:1", limit=1_000)

    async def never(target: Path, size: int) -> None:
        raise AssertionError("fetched a file over the limit")

    with pytest.raises(
        StorageError, match=r"http://127.0.0.1:1/big.tar: the server does not serve byte ranges, and this file is 1,001 bytes"
    ):
        asyncio.run(whole.read("big.tar", 0, 10, url="http://127.0.0.1:1/big.tar", meta={"size": 1_001}, fetch=never))
