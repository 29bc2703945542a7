"""A URL list is input: a brace list as long as the documented bound (10^7 files) costs the memory
of its pattern, not of its URLs (it took 3.8 GB and ended in a MemoryError), opening one HEADs a
bounded number of files at a time, and a pattern that is no pattern (a 5,000-digit bound,
unbalanced or runaway braces) is a `ConfigurationError` naming it, never Python's own error."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import pytest

from stoker.errors import ConfigurationError, StorageError
from stoker.storage import open_storage
from stoker.storage.remote.url_lists import MAX_URLS, parse_url_list
from stoker_testbed.availability import started
from stoker_testbed.servers.http_server import HttpFileServer


def _peak_mb(work: object) -> float:
    """The peak of memory Python allocated while ``work()`` ran, in MB."""
    tracemalloc.start()
    try:
        work()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_a_brace_list_of_the_most_urls_allowed_costs_the_memory_of_its_pattern() -> None:
    pattern = f"https://host.example/data/shard-{{0000000..{MAX_URLS - 1}}}.jpg"
    found: dict[str, object] = {}

    def parse() -> None:
        listed = parse_url_list(pattern)
        assert listed.names is not None
        found.update(count=len(listed.names), first=listed.names[0], last=listed.names[-1], middle=listed.names[1234567])

    assert _peak_mb(parse) < 1.0
    assert found == {"count": MAX_URLS, "first": "shard-0000000.jpg", "last": "shard-9999999.jpg", "middle": "shard-1234567.jpg"}


@pytest.mark.parametrize(
    ("urls", "message"),
    [
        ("https://host/a-{0.." + "9" * 5000 + "}.tar", "5,000 digits"),
        ("https://host/a-{" + "1" * 5000 + "..2}.tar", "5,000 digits"),
        ("https://host/a-{1..2.." + "3" * 4400 + "}.tar", "4,400 digits"),
        ("https://host/{a..z.." + "7" * 5000 + "}.tar", "5,000 digits"),
        ("https://host/a-{1,2.tar", "unbalanced"),
        ("https://host/a-1,2}.tar", "unbalanced"),
        ("https://host/" + "{a," * 2000 + "b" + "}" * 2000 + ".tar", "nested more than"),
        ("https://host/a-{0..9999}{0..9999}.tar", "mistyped"),
    ],
)
def test_a_pattern_that_is_no_list_is_refused_by_name(urls: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as refused:
        parse_url_list(urls)
    assert "https://host/" in str(refused.value)


@pytest.mark.parametrize(
    ("urls", "message", "named"),
    [
        ("https://[::1/a-{0..2}.tar", "Invalid IPv6 URL", "[::1/a-{0..2}.tar"),
        ("https://user:PW-SECRET@[::1/a-{0..2}.tar", "Invalid IPv6 URL", "[::1/a-{0..2}.tar"),
        ("https://[::1]:99999999/a.tar", "not a URL stoker can request", "https://[::1]:99999999/a.tar"),
        ("https://host:99999/a-{0..2}.tar", "Port out of range", "https://host:99999/a-0.tar"),
        ("https://host:http/a-{0..2}.tar", "Port could not be cast", "https://host:http/a-0.tar"),
        ("https://user:PW-SECRET@host:8080/a-{0..2}.tar", "credentials in a URL", "https://host:8080/a-0.tar"),
        ("ftp://user:PW-SECRET@host:8080/a-{0..2}.tar", "not an http", "ftp://host:8080/a-0.tar"),
        ("https://host:8080/a.tar::https://user:PW-SECRET@other:8080/b.tar", "share one server", "https://other:8080/b.tar"),
    ],
    ids=[
        "ipv6 unclosed",
        "ipv6 unclosed with credentials",
        "ipv6 port",
        "port past 65535",
        "port of text",
        "credentials",
        "ftp",
        "two servers",
    ],
)
def test_a_url_urllib_cannot_split_or_with_credentials_is_refused_naming_it_without_them(urls: str, message: str, named: str) -> None:
    # Before: urllib's own ValueError (an IPv6 address without its bracket), a port past 65535
    # accepted and every request named "http:<not a URL>", and the credentials' URL named
    # without its port ("https://host/a-0.tar").
    with pytest.raises(ConfigurationError, match=message) as refused:
        parse_url_list(urls)
    assert named in str(refused.value) and "SECRET" not in str(refused.value), str(refused.value)


@pytest.fixture
def server() -> Iterator[HttpFileServer]:
    web = started(HttpFileServer(), "the HTTP test server (aiohttp)")
    yield web
    web.close()


def test_opening_a_million_image_urls_the_server_lacks_fails_by_name_in_bounded_memory(server: HttpFileServer) -> None:
    # Every file is HEADed, a bounded number at a time: the first missing one ends the open,
    # named, and the memory held is the workers', not a URL and a task per file.
    url = server.url("absent/{0000000..0999999}.jpg")
    raised: list[BaseException] = []

    def open_it() -> None:
        with pytest.raises(StorageError) as error:
            open_storage(url, max_in_flight=8)
        raised.append(error.value)

    assert _peak_mb(open_it) < 30.0
    assert server.url("absent/") in str(raised[0]) and ".jpg" in str(raised[0])
