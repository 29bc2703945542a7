"""The fuzz suite's operator inputs: key lists, filter expressions and the side tables a filter
joins. Each is run in the worker (`run`) and judged there: it works as it says, or it is refused
by stoker's own error naming what it refused; anything else raises.

- ``key-list``: a key list file (Parquet, as `Loader.save_keys` writes it), mutated, read back by
  ``load_state_dict(keys_before=...)`` over a changed dataset: a `ProvenanceError` naming the file.
- ``side-table-parquet``, ``side-table-csv``, ``side-table-jsonl``: a side table in each format a
  user reads one from, mutated; what pyarrow reads of it (as a pyarrow Table, a DataFrame and a
  dict) filtered by several expressions: kept samples, or a `ConfigurationError` naming the filter.
- ``filter`` (generated): any expression, grammar-shaped or raw text, over a side table with
  missing values in each of its forms.
- ``exclude-keys`` (generated): any iterable of anything as ``exclude(keys=...)``: exactly those
  samples left out, or a `ConfigurationError` naming ``exclude``.
"""

from __future__ import annotations

import itertools
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling, Where
from stoker.storage import MemoryStorage

KEYS = [f"k{index:03d}" for index in range(40)]
SIDE_TABLES = ("side-table-parquet", "side-table-csv", "side-table-jsonl")
FILE_KINDS = ("key-list", *SIDE_TABLES)
EXPRESSIONS = [
    "score > 0.25",
    "lang in ['en', 'de'] and not (stars < 3)",
    "stars >= 3 or lang == 'fr'",
    "lang < 'f' and score != 0.5",
    "meta == 'x' or score <= -1e999",
]


def _storage(keys: list[str] = KEYS) -> MemoryStorage:
    return MemoryStorage({key: key.encode() for key in keys})


def _loader(keys: list[str] = KEYS, where: Any = None) -> Loader:
    return Loader(_storage(keys), batch_size=4, decode=bytes, sampling=Sampling(seed=7, in_order=True, where=where))


def _table_rows() -> dict[str, list[Any]]:
    """A side table of most keys (not all: a sample it lacks is not kept), with a gap in each column."""
    keys = KEYS[:-3]
    return {
        "key": keys,
        "score": [None if index % 9 == 4 else (index % 7) / 7 for index in range(len(keys))],
        "stars": [None if index % 11 == 3 else index % 5 for index in range(len(keys))],
        "lang": [None if index % 13 == 6 else ["en", "de", "fr", "ja"][index % 4] for index in range(len(keys))],
        "meta": [f"m{index}" if index % 2 else "x" for index in range(len(keys))],
    }


def make_seeds(root: Path) -> dict[str, tuple[Path, str]]:
    """The file targets' seeds under ``root``: each one's folder and the file mutated in it."""
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.parquet

    seeds = {}
    folder = root / "key-list"
    folder.mkdir(parents=True)
    loader = _loader()
    batches = iter(loader)
    next(batches), next(batches)
    (folder / "state.json").write_text(json.dumps(loader.state_dict()))
    loader.save_keys(folder / "keys.parquet")
    loader.close()
    seeds["key-list"] = (folder, "keys.parquet")
    table = pa.table(_table_rows())
    for kind, name in zip(SIDE_TABLES, ("table.parquet", "table.csv", "table.jsonl")):
        folder = root / kind
        folder.mkdir(parents=True)
        if kind == "side-table-parquet":
            pyarrow.parquet.write_table(table, folder / name)
        elif kind == "side-table-csv":
            pyarrow.csv.write_csv(table, folder / name)
        else:
            (folder / name).write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))
        seeds[kind] = (folder, name)
    return seeds


def _key_list(folder: Path) -> None:
    """Resume over a changed dataset by the (mutated) key list, and deliver a batch."""
    resumed = _loader([*KEYS, "k-new"])
    try:
        resumed.load_state_dict(json.loads((folder / "state.json").read_text()), keys_before=folder / "keys.parquet")
        next(iter(resumed), None)
    finally:
        resumed.close()


def _read_table(kind: str, path: Path) -> Any:
    """What pyarrow reads of a side table file; None if it reads nothing (not stoker's to judge)."""
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.json
    import pyarrow.parquet

    readers = {
        "side-table-parquet": pyarrow.parquet.read_table,
        "side-table-csv": pyarrow.csv.read_csv,
        "side-table-jsonl": pyarrow.json.read_json,
    }
    try:
        return readers[kind](path)
    except (pa.ArrowException, OSError, ValueError):
        return None


def filtered(expression: str, table: Any) -> None:
    """Filter the samples by ``expression`` over ``table``: a subset kept, or the filter named.

    Raises:
        AssertionError: A refusal that does not name the filter, or more kept than there are.
    """
    try:
        kept = _loader(where=Where(expression, table=table)).storage
    except ConfigurationError as error:
        if "where" not in str(error):
            raise AssertionError(f"a filter refused without saying so: {error}") from error
        return
    if not 0 < len(kept) <= len(KEYS):
        raise AssertionError(f"{expression!r} kept {len(kept)} of {len(KEYS)}")


def _side_table(kind: str, path: Path) -> None:
    table = _read_table(kind, path)
    if table is None:
        return
    forms = [table]
    for convert in (table.to_pydict, table.to_pandas):
        try:
            forms.append(convert())
        except Exception:  # a table pyarrow cannot hand over so (names not UTF-8) is not one a user could pass
            pass
    for form in forms:
        for expression in EXPRESSIONS:
            filtered(expression, form)


def _excluded(value: dict[str, Any]) -> None:
    """``exclude(keys=...)`` with a generated key list: exactly those samples left out, or refused naming exclude."""
    keys = value["keys"]
    shaped = {
        "list": lambda: list(keys),
        "tuple": lambda: tuple(keys),
        "generator": lambda: (key for key in keys),
        "numpy": lambda: np.array(keys, dtype=object),
        "endless": lambda: itertools.cycle(keys),
        "set": lambda: set(keys),
    }[value["shape"]]
    try:
        given = shaped()
    except (TypeError, ValueError):  # an unhashable key in a set, a ragged NumPy array: not one a caller could make
        return
    loader = _loader()
    try:
        try:
            loader.exclude(keys=given)
        except ConfigurationError as error:
            if "exclude" not in str(error):
                raise AssertionError(f"refused without naming exclude: {error}") from error
            return
        delivered = [key for batch in loader for key, valid in zip(batch.keys, batch.valid) if valid]
    finally:
        loader.close()
    meant = {key.decode() if isinstance(key, bytes) else key for key in keys}
    if sorted(delivered) != sorted(set(KEYS) - meant):
        raise AssertionError(f"exclude(keys={keys!r}) delivered {len(delivered)}, not the {len(set(KEYS) - meant)} left")


def _generated_filter(value: dict[str, Any]) -> None:
    filtered(value["expression"], TABLES[value["table"]]())


def run(kind: str, path: Path) -> None:
    """One case of ``kind`` at ``path`` (a case folder, or a pickled generated value)."""
    if kind == "key-list":
        _key_list(path)
    elif kind in SIDE_TABLES:
        _side_table(kind, next(path.glob("table.*")))
    else:
        value = pickle.loads(path.read_bytes())  # written by the suite itself
        (_generated_filter if kind == "filter" else _excluded)(value)


def _pandas_table() -> Any:
    import pandas as pd

    rows = _table_rows()
    return pd.DataFrame(
        {
            "key": rows["key"],
            "score": pd.array(rows["score"], dtype="Float64"),
            "stars": pd.array(rows["stars"], dtype="Int64"),
            "lang": pd.array(rows["lang"], dtype="string"),
            "meta": pd.Series(rows["meta"], dtype=object),
        }
    )


def _arrow_table() -> Any:
    import pyarrow as pa

    return pa.table(_table_rows())


TABLES = {"dict": _table_rows, "pandas": _pandas_table, "arrow": _arrow_table}

# ---- generated values ------------------------------------------------------------------------

_NUMBERS = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.integers(300, 1_900).map(lambda digits: "9" * digits),
    st.integers(300, 1_900).map(lambda digits: "-1" + "0" * digits),
    st.floats(allow_nan=False).map(repr),
    st.sampled_from(["1e999", "-1e999", "0.0", "-0", "1_000", "0x1F", "1e-400", "2**70", "9223372036854775808"]),
)
_NUMERIC = st.sampled_from(["score", "stars"])
_TEXTUAL = st.sampled_from(["lang", "meta", "key"])
_COLUMNS = st.one_of(_NUMERIC, _TEXTUAL, st.sampled_from(["absent", "meta.x", "true", "None"]))
_TEXTS = st.one_of(st.sampled_from(["'en'", "'de'", "'x'", "''", "'\\x00'"]), st.text(max_size=6).map(repr))
_CONSTANTS = st.one_of(_NUMBERS, _TEXTS, st.sampled_from(["true", "false", "None", "b'x'"]))
_COMPARE = st.sampled_from(["<", "<=", ">", ">=", "==", "!=", " in ", " not in ", " is ", " is not "])


def _lists(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(inner, max_size=4).map(lambda items: "[" + ", ".join(items) + "]")


def _grammar() -> st.SearchStrategy[str]:
    """Filters shaped as people write them (a column against constants, chained, in a list),
    and as they mistype them, joined by and, or, not, and parentheses to any depth."""
    operand = st.one_of(_COLUMNS, _CONSTANTS, _lists(_CONSTANTS), _lists(_lists(_CONSTANTS)))
    symbol = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    comparison = st.one_of(
        st.tuples(_NUMERIC, symbol, _NUMBERS).map(" ".join),
        st.tuples(_NUMBERS, symbol, _NUMERIC).map(" ".join),
        st.tuples(_NUMBERS, symbol, _NUMERIC, symbol, _NUMBERS).map(" ".join),
        st.tuples(_TEXTUAL, symbol, _TEXTS).map(" ".join),
        st.tuples(_COLUMNS, symbol, _CONSTANTS).map(" ".join),
        st.tuples(_COLUMNS, st.sampled_from(["in", "not in"]), _lists(_CONSTANTS)).map(" ".join),
        st.tuples(_COLUMNS, st.sampled_from(["in", "not in"]), _lists(_CONSTANTS), st.sampled_from(["in", "<", "=="]), operand).map(
            " ".join
        ),
        st.lists(st.tuples(_COMPARE, operand), min_size=1, max_size=3).flatmap(
            lambda rest: operand.map(lambda first: first + "".join(symbol + right for symbol, right in rest))
        ),
    )
    return st.recursive(
        comparison,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from([" and ", " or "]), inner).map("".join),
            inner.map(lambda text: f"not ({text})"),
            st.tuples(inner, st.integers(1, 200)).map(lambda pair: "(" * pair[1] + pair[0] + ")" * pair[1]),
        ),
        max_leaves=5,
    )


FILTERS = st.fixed_dictionaries(
    {
        "expression": st.one_of(
            _grammar(), _grammar(), _grammar(), st.text(max_size=80), st.text(alphabet="()[]<>=!not andor'\"0123456789.e-+ ", max_size=120)
        ),
        "table": st.sampled_from(sorted(TABLES)),
    }
)
_KEY = st.one_of(
    st.sampled_from(KEYS),
    st.sampled_from(KEYS).map(str.encode),
    st.none(),
    st.text(max_size=8),
    st.binary(max_size=6),
    st.integers(),
    st.floats(),
    st.lists(st.sampled_from(KEYS), max_size=2),
)
EXCLUSIONS = st.fixed_dictionaries(
    {
        "keys": st.lists(st.sampled_from(KEYS), max_size=6) | st.lists(_KEY, max_size=6),
        "shape": st.sampled_from(["list", "tuple", "generator", "numpy", "endless", "set"]),
    }
)
GENERATED = {"filter": FILTERS, "exclude-keys": EXCLUSIONS}
KINDS = (*FILE_KINDS, *GENERATED)
