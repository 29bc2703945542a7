"""The one JSON reader (`stoker._bounded.parse_json`, `read_json`): what it parses is what the
standard library parses, and what it refuses (too large, nested too deep, a number too long, not
JSON) is a `JsonError` naming the source and the bound, never a RecursionError, a MemoryError or
the interpreter's digit-limit ValueError; a file is refused by its size before it is read."""

from __future__ import annotations

import json
import math
import os
import resource
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from stoker._bounded import MAX_JSON_DEPTH, parse_json, read_json
from stoker.errors import JsonError, StorageError

# Strings that hold what the depth scan must see through: brackets, quotes, backslashes, escapes.
TRICKY_TEXT = st.text(alphabet=st.sampled_from(list('[]{}"\\/ab\u00e9\u2603\n\t0123456789')), max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | TRICKY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY_TEXT, inner, max_size=4),
    max_leaves=40,
)


def depth(value: Any) -> int:
    """How deep ``value``'s lists and dicts nest (a scalar: 0)."""
    if isinstance(value, list):
        return 1 + max((depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(item) for item in value.values()), default=0)
    return 0


def nested(value: Any, levels: int) -> Any:
    for level in range(levels):
        value = [value] if level % 2 else {"k[": value}
    return value


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=VALUES, extra=st.integers(0, 80), ascii_only=st.booleans(), bound=st.sampled_from([3, 8, MAX_JSON_DEPTH]))
def test_json_is_parsed_as_the_standard_library_does_or_refused_past_its_depth(
    value: Any, extra: int, ascii_only: bool, bound: int
) -> None:
    value = nested(value, extra)
    text = json.dumps(value, ensure_ascii=ascii_only)
    levels = depth(value)
    if levels > bound:
        with pytest.raises(JsonError, match=rf"^case: JSON nested too deep \({levels:,} levels, past the {bound} stoker reads\)"):
            parse_json(text.encode(), "case", max_bytes=1 << 20, max_depth=bound)
    else:
        assert parse_json(text.encode(), "case", max_bytes=1 << 20, max_depth=bound) == json.loads(text)
        assert parse_json(text, "case", max_bytes=1 << 20, max_depth=bound) == json.loads(text)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.binary(max_size=200) | st.text(alphabet=st.sampled_from(list('[]{}":,\\ 0123456789.eE-+tfnaNIu')), max_size=200).map(str.encode)
)
@example(data=b"[" * 5000)
@example(data=b'{"a": ' * 3000)
@example(data=b"9" * 5000)
@example(data=b"[1e" + b"9" * 5000 + b"]")
@example(data=b"\xff\xfe[\x00")
def test_any_bytes_parse_as_the_standard_library_does_or_are_a_named_json_error(data: bytes) -> None:
    try:
        parsed = parse_json(data, "case", max_bytes=1 << 20)
    except JsonError as error:
        assert str(error).startswith("case: ") and error.source == "case", error
        return
    expected = json.loads(data)
    assert parsed == expected or (isinstance(parsed, float) and math.isnan(parsed) and math.isnan(expected))


def test_the_bounds_are_named() -> None:
    with pytest.raises(JsonError, match=r"^index\.json: JSON nested too deep \(100,000 levels, past the 64 stoker reads\)"):
        parse_json(b"[" * 100_000 + b"]" * 100_000, "index.json", max_bytes=1 << 20)
    with pytest.raises(JsonError, match=r"^state\.json: a number of 5,000 digits in JSON \(past the 100 stoker reads\)"):
        parse_json(b'{"epoch": ' + b"7" * 5000 + b"}", "state.json", max_bytes=1 << 20)
    with pytest.raises(JsonError, match=r"^meta: 2,000 bytes of JSON, over the 1,000 stoker reads here"):
        parse_json(b" " * 2000, "meta", max_bytes=1000)
    with pytest.raises(JsonError, match=r"^doc: not valid JSON"):
        parse_json(b"{'a': 1}", "doc", max_bytes=1000)
    assert parse_json(b'["' + b"7" * 5000 + b'"]', "digits in a string", max_bytes=1 << 20) == ["7" * 5000]
    deepest: list[Any] = []
    for _ in range(63):
        deepest = [deepest]
    assert parse_json(b"[" * 64 + b"]" * 64, "64 deep", max_bytes=1 << 20) == deepest


def test_a_json_error_is_a_storage_error_and_a_value_error_and_pickles() -> None:
    import pickle

    with pytest.raises(JsonError) as caught:
        parse_json(b"[" * 65, "x.json", max_bytes=1 << 20)
    error = caught.value
    assert isinstance(error, StorageError) and isinstance(error, ValueError)
    again = pickle.loads(pickle.dumps(error))
    assert (str(again), again.source, again.reason) == (str(error), "x.json", error.reason)


def test_a_sparse_file_of_gigabytes_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    with open(path, "wb") as file:
        file.truncate(4 << 30)  # 4 GB of holes: nothing on disk, everything to a reader
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(StorageError, match=r"index\.json: 4,294,967,296 bytes, over the 1,048,576 bytes stoker reads as an index"):
        read_json(path, what="an index", max_bytes=1 << 20)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000, "KB: nothing of it was read"


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    os.mkfifo(path)
    with pytest.raises(StorageError, match="a FIFO, not a regular file"):
        read_json(path, what="a state", max_bytes=1 << 20)
