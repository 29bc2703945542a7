"""Bad data on a web server: a tar shard cut short (no sidecar: stoker indexes it), a sidecar that
belongs to another version of its shard, a server that is not there. Each is a named error
that says which URL and what; nothing hangs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stoker.errors import ShardError, StorageError
from stoker.ingest import convert_storage
from stoker.storage import open_storage
from stoker.storage.policies import RetryPolicy
from stoker_testbed.availability import started
from stoker_testbed.data.datasets import dataset
from stoker_testbed.servers.http_server import HttpFileServer
from stoker_testbed.servers.server import free_port


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpFileServer]:
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path / "cache"))
    web = started(HttpFileServer(), "the HTTP test server (aiohttp)")
    yield web
    web.close()


@pytest.fixture
def shards(tmp_path: Path) -> list[Path]:
    convert_storage(dataset(90), tmp_path / "shards", shard_size=40_000, progress=False, decode_check=False)
    return sorted((tmp_path / "shards").glob("*.tar"))


def test_a_shard_cut_short_is_named_by_its_url(server: HttpFileServer, shards: list[Path]) -> None:
    for path in shards:
        data = path.read_bytes()
        server.put(f"cut/{path.name}", data[: len(data) // 2] if path == shards[1] else data)
    with pytest.raises(ShardError, match=rf"{server.url('cut/' + shards[1].name)}: .*truncated") as raised:
        open_storage(server.url(f"cut/shard-{{000000..{len(shards) - 1:06d}}}.tar"))
    assert "/tmp" not in str(raised.value).split(":", 2)[1], "named by its URL, not the local copy"


def test_a_sidecar_of_another_version_of_its_shard_is_refused(server: HttpFileServer, shards: list[Path]) -> None:
    for path in shards:
        server.put(f"stale/{path.name}.idx", (path.parent / (path.name + ".idx")).read_bytes())
        server.put(f"stale/{path.name}", path.read_bytes() + (bytes(1024) if path == shards[0] else b""))
    with pytest.raises(StorageError, match=rf"{shards[0].name}: the server has \d+ bytes, its index is of a shard of \d+"):
        open_storage(server.url(f"stale/shard-{{000000..{len(shards) - 1:06d}}}.tar"))


def test_no_server_at_the_url_is_raised_after_the_open_deadline_naming_the_file() -> None:
    url = f"http://127.0.0.1:{free_port()}/gone/shard-000000.tar"
    with pytest.raises(StorageError, match="shard-000000.tar"):
        open_storage(url, retry=RetryPolicy(deadline=2, open_deadline=2, base_delay=0.1, max_delay=0.5), connect_timeout=0.5)
