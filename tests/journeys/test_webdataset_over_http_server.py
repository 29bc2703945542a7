"""A user's journey, kept: WebDataset shards written by ``webdataset.ShardWriter``, served by
``python -m http.server`` from their folder, read by a Loader given nothing but the URL, all with
the tools' own defaults. Python's server serves no byte ranges: this read each sample for minutes
as an outage (obstore's client), then refused every sample (stoker's first own client), before the
fallback that fetches each shard whole once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stoker import Loader
from stoker_testbed.availability import started
from stoker_testbed.data.images import jpeg
from stoker_testbed.servers.http_server import StdlibFileServer

webdataset = pytest.importorskip("webdataset", reason="the journey starts from WebDataset's own writer")


def test_webdataset_shards_over_python_http_server_read_a_whole_epoch_with_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "shards"
    folder.mkdir()
    with webdataset.ShardWriter(str(folder / "shard-%06d.tar"), maxcount=40, verbose=0) as sink:
        for index in range(100):
            sink.write({"__key__": f"sample{index:05d}", "jpg": jpeg(40, 32, seed=index), "cls": index % 4})
    shards = sorted(folder.glob("*.tar"))
    assert len(shards) == 3
    # What WebDataset itself reads from the files: the truth.
    theirs = {
        sample["__key__"]: (sample["jpg"], int(sample["cls"]))
        for sample in webdataset.WebDataset([str(path) for path in shards], shardshuffle=False)
    }

    server = started(StdlibFileServer(folder), "python -m http.server")
    try:
        loader = Loader(server.url("shard-{000000..000002}.tar"), batch_size=16)
        seen: Counter[str] = Counter()
        try:
            for batch in loader:
                for key, data, label in zip(batch.keys, batch.data, batch.labels):
                    assert (data, int(label)) == theirs[key], key
                    seen[key] += 1
        finally:
            loader.close()
        fetched = Counter(path for path in server.requests("GET") if path.endswith(".tar"))
    finally:
        server.close()
    assert seen == Counter(dict.fromkeys(theirs, 1)), "every sample once"
    assert set(fetched) == {f"/{path.name}" for path in shards} and sum(fetched.values()) <= len(shards) + 1, (
        f"each shard fetched whole once (and one question whether the server serves ranges): {fetched}"
    )
