"""Datasets on a plain web server, named by URL (WebDataset's brace form), against a real HTTP
server on loopback (aiohttp's file handler: ranged GETs, HEAD, ETags) and against WebDataset's
own reader of the same URLs. URL lists expanded lazily: the same URLs as braceexpand (the library
WebDataset expands them with) in the same order, the i-th computed without the others, and a list
checked and named without listing it (hostile lists: tests/faults/operator/test_url_list_faults.py)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from braceexpand import braceexpand
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stoker import Loader
from stoker.cli import main
from stoker.errors import ConfigurationError, StorageError
from stoker.ingest import convert_storage
from stoker.loader import Sampling
from stoker.storage import HTTPStorage, open_storage
from stoker.storage.policies import RetryPolicy
from stoker.storage.remote import expand_urls
from stoker.storage.remote.url_lists import BracePattern, parse_url_list
from stoker_testbed.availability import started
from stoker_testbed.data.datasets import dataset, epoch_contents
from stoker_testbed.data.peer_formats import random_samples, write_mds
from stoker_testbed.servers.http_server import HttpFileServer


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpFileServer]:
    server = started(HttpFileServer(), "the HTTP test server (aiohttp: pip install aiohttp)")
    yield server
    server.close()


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """Tar shards as `stoker convert` writes them (with .idx sidecars), and each sample's bytes."""
    folder = tmp_path_factory.mktemp("shards")
    source = dataset(240)
    convert_storage(source, folder / "shards", shard_size=50_000, progress=False, decode_check=False)
    truth = {key.rsplit(".", 1)[0]: value for key, value in zip(source.keys, source.read_many(source.keys))}
    return folder / "shards", truth


def _publish(server: HttpFileServer, shards: Path, folder: str, *, sidecars: bool) -> str:
    """The shards under ``folder`` on the server; the brace URL that names them."""
    tars = sorted(shards.glob("*.tar"))
    for path in tars:
        server.put(f"{folder}/{path.name}", path.read_bytes())
        if sidecars:
            server.put(f"{folder}/{path.name}.idx", (path.parent / (path.name + ".idx")).read_bytes())
    stem = tars[0].name.rsplit("-", 1)[0]
    width = len(tars[0].stem.rsplit("-", 1)[1])
    return server.url(f"{folder}/{stem}-{{{0:0{width}d}..{len(tars) - 1:0{width}d}}}.tar")


def test_unindexed_shards_by_brace_url_deliver_every_sample_once_and_are_indexed_once(
    http_server: HttpFileServer, shards: tuple[Path, dict[str, bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, truth = shards
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path / "cache"))
    url = _publish(http_server, folder, "plain", sidecars=False)
    total = sum(path.stat().st_size for path in folder.glob("*.tar"))
    with open_storage(url) as storage:
        assert isinstance(storage, HTTPStorage) and storage.layout == "shards"
        opened_with = storage.traffic.snapshot()["bytes_read"]
        loader = Loader(storage, batch_size=32, decode=bytes, sampling=Sampling(shuffle="uniform", seed=4))
        try:
            assert epoch_contents(loader, truth) == Counter(dict.fromkeys(truth, 1))
            traffic = loader.stats().storage
        finally:
            loader.close()
        assert storage.sample_name(0).startswith(http_server.url("plain/")) and "#" in storage.sample_name(0)
    assert traffic is not None and traffic["cost"]["dollars"] == 0.0
    assert opened_with >= total, "each shard was fetched whole once to index it"
    with open_storage(url) as again:  # the saved indexes: nothing but HEADs and the missing sidecars
        opened = again.traffic.snapshot()
        assert opened["bytes_read"] < total / 10
        assert dict(zip(again.keys, again.read_many(list(again.keys)))) == truth


def test_shards_with_sidecar_indexes_open_without_fetching_a_shard(
    http_server: HttpFileServer, shards: tuple[Path, dict[str, bytes]]
) -> None:
    folder, truth = shards
    url = _publish(http_server, folder, "indexed", sidecars=True)
    total = sum(path.stat().st_size for path in folder.glob("*.tar"))
    with open_storage(url, block_bytes=20_000) as storage:
        assert storage.traffic.snapshot()["bytes_read"] < total / 5
        assert storage.traffic.snapshot()["requests"]["HEAD"] == len(list(folder.glob("*.tar")))
        loader = Loader(storage, batch_size=16, decode=bytes, sampling=Sampling(shuffle="block", seed=5))
        try:
            assert epoch_contents(loader, truth) == Counter(dict.fromkeys(truth, 1))
        finally:
            loader.close()
        assert storage.stats()["block_fetches"] < len(truth) / 2, "block streaming works over HTTP"


def test_the_same_samples_as_webdatasets_reader_of_the_same_urls(
    http_server: HttpFileServer, shards: tuple[Path, dict[str, bytes]]
) -> None:
    webdataset = pytest.importorskip("webdataset", reason="the differential test needs WebDataset")
    folder, _ = shards
    url = _publish(http_server, folder, "differential", sidecars=False)
    theirs = {sample["__key__"]: sample["jpg"] for sample in webdataset.WebDataset(url, shardshuffle=False)}
    with open_storage(url) as storage:
        ours = dict(zip(storage.keys, storage.read_many(list(storage.keys))))
    assert len(ours) == len(theirs) == 240 and ours == theirs


def test_a_folder_url_with_mosaicmls_index_is_read_in_place(http_server: HttpFileServer, tmp_path: Path) -> None:
    samples = random_samples(50)
    local = write_mds(tmp_path / "mds", samples)
    for path in sorted(local.iterdir()):
        http_server.put(f"mds/{path.name}", path.read_bytes())
    with open_storage(http_server.url("mds/")) as storage:
        assert storage.layout == "peer" and len(storage) == len(samples)
        assert storage.read_indices(list(range(len(samples)))) == [payload for payload, _ in samples]
        assert list(storage.labels) == [label for _, label in samples]


def test_a_private_dataset_is_read_with_the_users_header_and_refused_without(shards: tuple[Path, dict[str, bytes]]) -> None:
    folder, truth = shards
    token = "s3cret-token-value"
    server = started(HttpFileServer(token=token), "the HTTP test server")
    try:
        url = _publish(server, folder, "private", sidecars=True)
        with pytest.raises(StorageError) as refused:
            open_storage(url, retry=RetryPolicy(deadline=2, open_deadline=2))
        assert token not in str(refused.value)
        with open_storage(url, headers={"Authorization": f"Bearer {token}"}) as storage:
            assert dict(zip(storage.keys, storage.read_many(list(storage.keys)))) == truth
            assert token not in storage.describe() and token not in storage.sample_name(0)
    finally:
        server.close()


def test_a_brace_list_of_image_files_is_read_file_by_file_each_named_by_its_url(http_server: HttpFileServer) -> None:
    source = dataset(60)
    truth = {f"img-{index:03d}.jpg": data for index, data in enumerate(source.read_many(source.keys))}
    for name, data in truth.items():
        http_server.put(f"images/{name}", data)
    with open_storage(http_server.url("images/img-{000..059}.jpg"), block_bytes=20_000) as storage:
        assert list(storage.keys) == sorted(truth) and storage.keys[-1] == "img-059.jpg"
        assert list(storage.labels) == [None] * len(truth)
        assert storage.sample_name(17) == http_server.url("images/img-017.jpg")
        assert storage.traffic.snapshot()["requests"]["HEAD"] == len(truth)
        loader = Loader(storage, batch_size=8, decode=bytes, sampling=Sampling(shuffle="uniform", seed=3))
        try:
            assert epoch_contents(loader, truth) == Counter(dict.fromkeys(truth, 1))
        finally:
            loader.close()


def test_a_missing_file_in_the_list_is_named(http_server: HttpFileServer, shards: tuple[Path, dict[str, bytes]]) -> None:
    folder, _ = shards
    url = _publish(http_server, folder, "gappy", sidecars=True)
    missing = url.rsplit("{", 1)[0] + "999999.tar"
    with pytest.raises(StorageError, match="999999.tar"):
        open_storage(f"{url}::{missing}")


def test_a_damaged_saved_index_is_rebuilt_with_a_warning(
    http_server: HttpFileServer,
    shards: tuple[Path, dict[str, bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder, truth = shards
    monkeypatch.setenv("STOKER_CACHE", str(tmp_path / "cache"))
    url = _publish(http_server, folder, "damaged", sidecars=False)
    open_storage(url).close()
    saved = sorted((tmp_path / "cache" / "http-index").glob("*.idx"))
    assert saved
    saved[0].write_bytes(saved[0].read_bytes()[:100])
    with caplog.at_level(logging.WARNING, logger="stoker.storage"), open_storage(url) as storage:
        assert dict(zip(storage.keys, storage.read_many(list(storage.keys)))) == truth
    assert "damaged" in caplog.text


@pytest.mark.parametrize(
    ("urls", "message"),
    [
        ("https://host/a.tar?X-Amz-Signature=abc", "query"),
        ("https://user:pw@host/a.tar", "credentials"),
        ("https://host/a.tar::https://other/b.tar", "one server"),
        ("https://host/a-{0..99999999999}.tar", "mistyped"),
        ("https://host/a.tar::https://host/a.tar", "twice"),
    ],
)
def test_url_lists_stoker_cannot_read_safely_are_refused_before_any_request(urls: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as refused:
        open_storage(urls)
    assert "pw" not in str(refused.value) and "abc" not in str(refused.value)


def test_stoker_inspect_reads_a_url_list(
    http_server: HttpFileServer, shards: tuple[Path, dict[str, bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, truth = shards
    url = _publish(http_server, folder, "inspected", sidecars=True)
    assert main(["inspect", url]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"{url}: http, {len(truth)} samples")
    assert f"{len(list(folder.glob('*.tar')))} shards of" in said and f".jpg ({len(truth)})" in said


# ---- URL lists, expanded lazily ----------------------------------------------------------------


def test_brace_expansion_is_webdatasets() -> None:
    assert expand_urls("https://h/a-{00..02}.tar") == ["https://h/a-00.tar", "https://h/a-01.tar", "https://h/a-02.tar"]
    assert expand_urls("https://h/{x,y}/s-{8..9}.tar::https://h/z.tar") == [
        "https://h/x/s-8.tar",
        "https://h/x/s-9.tar",
        "https://h/y/s-8.tar",
        "https://h/y/s-9.tar",
        "https://h/z.tar",
    ]


BOUNDS = st.sampled_from(["0", "1", "9", "10", "007", "-3", "-03", "12", "0010"])
TEXT = st.sampled_from(
    ["a", "b", "-", "/", "x.tar", ".", "\\", "\\\\", "\\{", "\\,", ",", "{", "}", "..", "05", "Z", "?", "%20", "{}", "{x}"]
)


def _patterns() -> st.SearchStrategy[str]:
    numbers = st.tuples(BOUNDS, BOUNDS, st.sampled_from(["", "..2", "..0", "..-3"])).map(
        lambda parts: "{" + "..".join(parts[:2]) + parts[2] + "}"
    )
    letters = st.tuples(st.sampled_from("aAzZmB"), st.sampled_from("aAzZmB"), st.sampled_from(["", "..2", "..5"])).map(
        lambda parts: "{" + "..".join(parts[:2]) + parts[2] + "}"
    )
    return st.recursive(
        TEXT | numbers | letters,
        lambda inner: (
            st.lists(inner, min_size=1, max_size=3).map(lambda parts: "{" + ",".join(parts) + "}")
            | st.lists(inner, min_size=1, max_size=3).map("".join)
        ),
        max_leaves=8,
    )


@settings(max_examples=400, deadline=None)
@given(st.lists(_patterns(), min_size=1, max_size=3).map("".join))
def test_any_pattern_expands_as_braceexpand_does_by_index_and_in_order(pattern: str) -> None:
    try:
        lazy = BracePattern(pattern)
    except ConfigurationError as error:  # unbalanced braces: braceexpand refuses them too
        assert "unbalanced" in str(error)
        with pytest.raises(ValueError, match="Unbalanced"):
            list(braceexpand(pattern))
        return
    assume(len(lazy) <= 5000)  # braceexpand lists them all
    expected = list(braceexpand(pattern))
    assert len(lazy) == len(expected)
    assert list(lazy) == expected
    assert [lazy[index] for index in range(len(lazy))] == expected
    if lazy.distinct():  # a claim made from the pattern's form, without listing it
        assert len(set(expected)) == len(expected)
    prefix = lazy.literal_prefix()
    assert all(url.startswith(prefix) for url in expected)
    if "\\" not in pattern:
        assert all(set(url[len(prefix) :]) <= lazy.characters() for url in expected)
        assert [lazy.rest_at(index) for index in range(len(lazy))] == [url[len(prefix) :] for url in expected]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["a", "-", "/", "x.tar"]),
            st.tuples(st.integers(0, 30), st.integers(0, 30)).map(lambda ends: f"{{{ends[0]:03d}..{ends[1]}}}"),
            st.lists(st.sampled_from(["p", "q", "r{1,2}", ""]), min_size=2, max_size=3).map(lambda parts: "{" + ",".join(parts) + "}"),
        ),
        max_size=4,
    ).map(lambda parts: "https://h/" + "".join(parts) + "s.tar")
)
def test_brace_lists_expand_exactly_as_braceexpand_does(pattern: str) -> None:
    assert expand_urls(pattern) == [url for url in braceexpand(pattern) if url]


HEADS = st.sampled_from(
    ["https://h/", "https://h/data/", "http://H:80/d/", "https://h", "https://h/a/./b/", "https://h//x/", "https://h/d%20x/"]
    + ["https://h/{train,val}/", "https://h/d/{a/b,a/c}/", "https://h/{/x,y}/", "https://{h,g}/", "http{,s}://h/", "https://h/d;p/"]
)
MIDDLES = st.sampled_from(["shard-{0..12}", "{000..011}", "{a..c}", "{x,y/z,}", "s{1,11}{1,11}", "f", "{a/x,a/y}", "%41{0..2}", ""])
ENDS = st.sampled_from([".tar", ".jpg", "", "/", ";x.tar", "?a=1"])


def _each_url_parsed(urls: list[str]) -> tuple[str, list[str]] | str:
    """What a list means, worked out URL by URL as the list's rules say (the folder the URLs
    share, each one's name under it), or the refusal's first words: the lazy reader must agree."""
    import posixpath
    from urllib.parse import unquote, urlparse

    parsed = [urlparse(url) for url in urls]
    server = (parsed[0].scheme.lower(), parsed[0].netloc.lower())
    for part in parsed:
        if part.scheme.lower() not in ("http", "https") or not part.netloc:
            return "not an http"
        if (part.scheme.lower(), part.netloc.lower()) != server:
            return "one dataset"
        if part.query or part.fragment:
            return "a URL with a query"
    paths = [unquote(part.path) for part in parsed]
    if len(paths) == 1 and (paths[0].endswith("/") or "." not in posixpath.basename(paths[0])):
        return paths[0].strip("/"), []
    folder = posixpath.commonpath([posixpath.dirname(path) or "/" for path in paths]).strip("/")
    names = [path.lstrip("/")[len(folder) + 1 if folder else 0 :] for path in paths]
    if any(not name or name.endswith("/") for name in names):
        return "a list's URLs"
    if len(set(names)) != len(names):
        return "named twice"
    return folder, names


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(HEADS, MIDDLES, ENDS).map("".join), min_size=1, max_size=3), st.booleans())
def test_a_list_is_read_as_url_by_url_reading_reads_it(pieces: list[str], joined: bool) -> None:
    urls = [url for piece in pieces for url in braceexpand(piece) if url]
    if not urls:
        return
    expected = _each_url_parsed(urls)
    try:
        listed = parse_url_list("::".join(pieces) if joined else pieces)
    except ConfigurationError as error:
        assert isinstance(expected, str) and expected in str(error), (expected, str(error))
        return
    assert not isinstance(expected, str), expected
    folder, names = expected
    assert listed.prefix == folder
    assert (listed.names is None and names == []) or list(listed.names or []) == names
    if listed.names is not None:
        assert [listed.names[index] for index in range(len(names))] == names


def test_a_list_of_ten_million_urls_is_checked_without_listing_it() -> None:
    listed = parse_url_list("https://host/data/{train,val}/shard-{0000000..4999999}.jpg")
    assert listed.prefix == "data" and listed.names is not None and len(listed.names) == 10_000_000
    assert listed.names[0] == "train/shard-0000000.jpg" and listed.names[-1] == "val/shard-4999999.jpg"
    assert listed.names[7_654_321] == "val/shard-2654321.jpg"
