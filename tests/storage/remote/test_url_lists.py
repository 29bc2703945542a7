"""URL lists in WebDataset's brace form, expanded lazily: the same URLs as braceexpand (the library
WebDataset expands them with) in the same order, the i-th computed without the others, and a
list checked and named without listing it. Against a server: tests/storage/remote/test_http.py;
hostile lists: tests/faults/inputs/test_url_list_faults.py."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stoker.errors import ConfigurationError
from stoker.storage.remote import expand_urls
from stoker.storage.remote._brace import BracePattern
from stoker.storage.remote._url_list import parse_url_list

braceexpand = pytest.importorskip("braceexpand", reason="the reference expansion is braceexpand's").braceexpand


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
