"""The operator's inputs are input: any text as a filter (`Sampling(where=...)`), any value as a
saved state's mixture schedule, filter schedule, exclusion digest or dataset-change record, either works or is a
`ConfigurationError` that names it; any bytes as a key list (`load_state_dict(keys_before=...)`)
are a `ProvenanceError` naming the file; any lines as an exclusions record read as the valid
ones. Nothing else escapes, nothing hangs, nothing aborts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from stoker import Loader
from stoker.errors import ConfigurationError, ProvenanceError
from stoker.loader import Sampling, Where
from stoker.observe import read_exclusions
from stoker.storage import MemoryStorage, MixedStorage

DATA = MemoryStorage({f"s{index}": b"x" for index in range(50)})
TABLE = {"key": [f"s{index}" for index in range(50)], "score": [index / 50 for index in range(50)], "lang": ["en", "de"] * 25}
ATOMS = st.sampled_from(
    [
        "score",
        "lang",
        "width",
        "0.5",
        "'en'",
        "[1, 'a']",
        "true",
        "(",
        ")",
        "and",
        "or",
        "not",
        "in",
        "<",
        ">=",
        "==",
        "+",
        "-",
        "**",
        "x.y",
        "f(x)",
        "lambda: 1",
        ",",
    ]
)
OPERANDS = st.sampled_from(
    ["score", "lang", "width", "0.5", "-1", "'en'", "[1, 'a']", "[0.5]", "(1, 2)", "true", "None", "1j", "b'x'", "...", "(score < 1)"]
)
OPERATORS = st.sampled_from(["<", "<=", ">", ">=", "==", "!=", "in", "not in", "is"])
COMPARISONS = st.builds(lambda left, operator, right: f"{left} {operator} {right}", OPERANDS, OPERATORS, OPERANDS)
SHAPED = st.lists(COMPARISONS, min_size=1, max_size=4).flatmap(
    lambda parts: st.lists(st.sampled_from([" and ", " or ", " and not "]), min_size=len(parts) - 1, max_size=len(parts) - 1).map(
        lambda joiners: parts[0] + "".join(joiner + part for joiner, part in zip(joiners, parts[1:]))
    )
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(expression=st.text(max_size=60) | st.lists(ATOMS, min_size=1, max_size=12).map(" ".join) | SHAPED)
def test_any_text_as_a_filter_keeps_a_subset_or_is_named(expression: str) -> None:
    try:
        kept = Loader(DATA, batch_size=8, sampling=Sampling(where=Where(expression, table=TABLE))).storage
    except ConfigurationError as error:
        assert "where" in str(error)
        return
    assert 0 < len(kept) <= len(DATA)


def _mixture_loader() -> Loader:
    big = MemoryStorage({f"b{index}": b"b" for index in range(200)})
    small = MemoryStorage({f"m{index}": b"m" for index in range(50)})
    return Loader(MixedStorage({"big": big, "small": small}, {"big": 0.7, "small": 0.3}, num_samples=100, seed=1), batch_size=10)


SAVED = _mixture_loader()
SAVED.set_mixture_schedule({0: {"big": 0.7, "small": 0.3}, 5: {"big": 0.2, "small": 0.8}})
STATE = SAVED.state_dict()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(part=st.sampled_from(["mixture_schedule", "excluded_digest"]), value=JSON)
def test_any_value_as_a_saved_schedule_or_exclusion_loads_or_is_named(part: str, value: Any) -> None:
    state = {**STATE, part: value}
    try:
        _mixture_loader().load_state_dict(state)
    except ConfigurationError as error:
        assert part.replace("_", " ") in str(error).replace("_", " ") or "mixture schedule" in str(error)


KEYED = Loader(MemoryStorage({f"s{index}": b"x" for index in range(40)}), batch_size=4, sampling=Sampling(seed=2))
_STREAM = iter(KEYED)
for _ in range(3):
    next(_STREAM)
KEYED_STATE = KEYED.state_dict()
del _STREAM


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON)
def test_any_value_as_a_saved_dataset_change_loads_or_is_named(value: Any) -> None:
    state = {**KEYED_STATE, "dataset_change": value}
    try:
        Loader(MemoryStorage({f"s{index}": b"x" for index in range(40)}), batch_size=4, sampling=Sampling(seed=2)).load_state_dict(state)
    except ConfigurationError as error:
        assert "dataset_change" in str(error)
    except ProvenanceError as error:  # a well-formed record: its key list is asked for, by name
        assert "keys_before" in str(error)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=400), keep_magic=st.booleans())
def test_any_bytes_as_a_key_list_are_refused_by_name(tmp_path_factory: Any, content: bytes, keep_magic: bool) -> None:
    path = tmp_path_factory.mktemp("keys") / "keys.parquet"
    path.write_bytes(b"PAR1" + content + b"PAR1" if keep_magic else content)
    changed = Loader(MemoryStorage({f"s{index}": b"x" for index in range(39)}), batch_size=4, sampling=Sampling(seed=2))
    try:
        changed.load_state_dict(KEYED_STATE, keys_before=path)
    except ProvenanceError as error:
        assert str(path) in str(error)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.binary(max_size=80) | JSON.map(lambda value: json.dumps(value).encode()), max_size=6))
def test_any_lines_as_an_exclusions_record_read_as_the_valid_ones(tmp_path_factory: Any, lines: list[bytes]) -> None:
    folder = tmp_path_factory.mktemp("ledger")
    (folder / "exclusions-rank-00000.jsonl").write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines))
    for record in read_exclusions(folder):
        assert isinstance(record["keys"], list) and record["samples"] >= 0 and record["rank"] == 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    numbers=st.binary(max_size=300),
    codes=st.binary(max_size=300),
    values=st.binary(max_size=120) | JSON.map(lambda value: json.dumps(value).encode()),
    kind=st.sampled_from(["numbers", "codes"]),
)
@example(numbers=b"", codes=b"", values=b"", kind="numbers")  # found by this test: an empty file was an EOFError
def test_any_bytes_as_a_cached_filter_column_read_back_as_a_column_or_not_at_all(
    tmp_path_factory: Any, monkeypatch: Any, numbers: bytes, codes: bytes, values: bytes, kind: str
) -> None:
    # The cache folder is input too: whatever a file there holds, a filter's column read back from
    # it has the dataset's length and a kind a filter takes, or is worked out again (None).
    from stoker.storage._column_cache import load_column, save_column

    monkeypatch.setenv("STOKER_CACHE", str(tmp_path_factory.mktemp("cache")))
    save_column("digest", "json", "field", np.arange(7.0) if kind == "numbers" else np.array(["a", None, "b", "a", None, "c", "d"], object))
    for path in (Path(os.environ["STOKER_CACHE"]) / "columns").iterdir():
        path.write_bytes({"numbers.npy": numbers, "codes.npy": codes, "values.json": values}[path.name.split(".", 1)[1]])
    column = load_column("digest", "json", "field", 7)
    assert column is None or (column.shape == (7,) and column.dtype in (np.float64, object))


def _scored_storage() -> Any:
    """A Parquet file with a ``score`` column, written once for the filter-schedule case."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from stoker.storage import ParquetStorage

    path = Path(tempfile.mkdtemp(prefix="stoker-fuzz-")) / "scored.parquet"
    pq.write_table(pa.table({"payload": [bytes([index]) for index in range(60)], "score": [index / 60 for index in range(60)]}), path)
    return ParquetStorage(path)


SCORED = _scored_storage()
SCHEDULED = Loader(SCORED, batch_size=4, sampling=Sampling(seed=2))
SCHEDULED.set_filter_schedule({0: "score < 0.5", 20: None})
_STREAM = iter(SCHEDULED)
next(_STREAM)
SCHEDULED_STATE = SCHEDULED.state_dict()
del _STREAM
EXPRESSIONS = st.lists(ATOMS, min_size=1, max_size=6).map(" ".join) | st.none() | JSON


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=JSON
    | st.fixed_dictionaries(
        {
            "points": st.lists(st.tuples(st.integers(-2, 50) | JSON, EXPRESSIONS).map(list), max_size=4),
            "epoch_filter": EXPRESSIONS,
        }
    )
)
def test_any_value_as_a_saved_filter_schedule_loads_or_is_named(value: Any) -> None:
    state = {**SCHEDULED_STATE, "filter_schedule": value}
    resumed = Loader(SCORED, batch_size=4, sampling=Sampling(seed=2))
    try:
        resumed.load_state_dict(state)
    except ConfigurationError as error:
        assert "filter_schedule" in str(error)
        return
    except ProvenanceError as error:  # a schedule that loads, whose epoch holds other samples than the state's
        assert "samples" in str(error)
        return
    keys = [key for batch in resumed for key, padding in zip(batch.keys, batch.padding) if not padding]
    assert len(keys) == len(set(keys)), "each sample at most once"
