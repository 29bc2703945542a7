"""A filter and its side table are input: a number of 4,000 digits, a chained ``in``, a pandas
column with NA, and a key column that is not text each either work as the expression says or are
a `ConfigurationError` naming the filter; none is a numpy or Python error (OverflowError,
ValueError, TypeError, UnicodeDecodeError), and no null key is taken for the text "None"."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker import Loader
from stoker.errors import ConfigurationError
from stoker.loader import Sampling, Where
from stoker.storage import MemoryStorage

COUNT = 40
DATA = MemoryStorage({f"s{index:02d}": b"x" for index in range(COUNT)})
KEYS = [f"s{index:02d}" for index in range(COUNT)]
OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}


def kept(expression: str, table: Any) -> list[str]:
    """The keys a filter keeps, in storage order."""
    return list(Loader(DATA, batch_size=4, sampling=Sampling(where=Where(expression, table=table))).storage.keys)


def by_python(values: list[Any], test: Any) -> list[str]:
    """What a filter must keep: the keys whose value passes ``test``, as Python compares."""
    return [key for key, value in zip(KEYS, values) if test(value)]


FLOATS = [float(index) - 20.5 for index in range(COUNT - 4)] + [float("inf"), float("-inf"), float("nan"), 1e308]
INTEGERS = [index * 10**17 - 2 * 10**18 for index in range(COUNT)]


@settings(max_examples=60, deadline=None)
@given(
    digits=st.integers(310, 3_990),
    negative=st.booleans(),
    symbol=st.sampled_from(sorted(OPERATORS)),
    column=st.sampled_from(["score", "count"]),
    constant_first=st.booleans(),
)
def test_a_number_of_thousands_of_digits_compares_as_python_compares_it(
    digits: int, negative: bool, symbol: str, column: str, constant_first: bool
) -> None:
    huge = 10 ** (digits - 1) * (-1 if negative else 1)
    values = FLOATS if column == "score" else INTEGERS
    table = {"key": KEYS, column: values}
    expression = f"{huge} {symbol} {column}" if constant_first else f"{column} {symbol} {huge}"
    compare = OPERATORS[symbol]
    expected = by_python(values, (lambda value: compare(huge, value)) if constant_first else (lambda value: compare(value, huge)))
    if not expected:
        with pytest.raises(ConfigurationError, match="keeps none"):
            kept(expression, table)
    else:
        assert kept(expression, table) == expected


def test_a_huge_number_in_a_chain_and_in_a_list_works() -> None:
    huge = "9" * 1_900  # twice, within the 4,000 characters a filter may have
    table = {"key": KEYS, "score": FLOATS}
    assert kept(f"-{huge} < score < {huge}", table) == by_python(FLOATS, lambda value: abs(value) < float("inf"))
    assert kept(f"score in [{huge}, 1e308, -0.5]", table) == by_python(FLOATS, lambda value: value in (1e308, -0.5))


@pytest.mark.parametrize(
    "expression",
    ["score in [1] in [1]", "lang in ['en'] in ['en', 'de']", "score < 3 in [true]", "'en' in ['en'] and score > 0"],
)
def test_in_tests_a_column_and_a_chain_that_tests_a_list_is_named(expression: str) -> None:
    table = {"key": KEYS, "score": FLOATS, "lang": ["en", "de"] * (COUNT // 2)}
    with pytest.raises(ConfigurationError, match="'in' tests a column"):
        kept(expression, table)


def _with_na() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": KEYS,
            "lang": pd.array(["en", None, "de", "fr"] * (COUNT // 4), dtype="string"),
            "stars": pd.array([5, None, 3, 1] * (COUNT // 4), dtype="Int64"),
            "nsfw": pd.array([True, None, False, False] * (COUNT // 4), dtype="boolean"),
            "note": pd.Series(["a", pd.NA, "b", None] * (COUNT // 4), dtype=object),
        }
    )


@pytest.mark.parametrize(
    ("expression", "test"),
    [
        ("lang == 'en'", lambda row: row[0] == "en"),
        ("lang != 'en'", lambda row: row[0] != "en"),
        ("lang in ['en', 'de']", lambda row: row[0] in ("en", "de")),
        ("lang not in ['en']", lambda row: row[0] != "en"),
        ("lang < 'e'", lambda row: row[0] is not None and row[0] < "e"),
        ("stars >= 3", lambda row: row[1] is not None and row[1] >= 3),
        ("nsfw == false", lambda row: row[2] is False),
        ("note > 'a' or lang == 'fr'", lambda row: row[3] == "b" or row[0] == "fr"),
        ("lang == 'en' and stars == 5", lambda row: row[0] == "en" and row[1] == 5),
    ],
)
def test_a_pandas_column_with_na_filters_as_missing_values_do(expression: str, test: Any) -> None:
    # A missing value is kept only by != and not in (as NaN is): never a TypeError.
    rows = [("en", 5, True, "a"), (None, None, None, None), ("de", 3, False, "b"), ("fr", 1, False, None)] * (COUNT // 4)
    assert kept(expression, _with_na()) == by_python(rows, test)


@pytest.mark.parametrize(
    ("table", "row", "what"),
    [
        ({"key": [*KEYS[:-1], b"\xff\xfe"], "score": FLOATS}, COUNT - 1, "not UTF-8"),
        (
            pa.table({"key": pa.array([key.encode() for key in KEYS[:-1]] + [b"\xc3"], pa.binary()), "score": FLOATS}),
            COUNT - 1,
            "not UTF-8",
        ),
        ({"key": [None, *KEYS[1:]], "score": FLOATS}, 0, "null"),
        (pd.DataFrame({"key": [*KEYS[:3], np.nan, *KEYS[4:]], "score": FLOATS}), 3, "null"),
        (pd.DataFrame({"key": pd.array([*KEYS[:7], None, *KEYS[8:]], dtype="string"), "score": FLOATS}), 7, "null"),
        (pa.table({"key": pa.array([*KEYS[:9], None, *KEYS[10:]]), "score": FLOATS}), 9, "null"),
        ({"key": [*KEYS[:2], ("s02",), *KEYS[3:]], "score": FLOATS}, 2, "tuple"),
    ],
    ids=["bytes", "arrow binary", "None", "NaN", "pandas NA", "arrow null", "tuple"],
)
def test_a_side_table_key_that_is_not_text_is_refused_by_name_with_its_row(table: Any, row: int, what: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"side table's key column: key {row} is .*{what}"):
        kept("score > 0", table)


def test_a_side_table_keyed_by_utf8_bytes_or_numbers_works() -> None:
    encoded = {"key": [key.encode() for key in KEYS], "score": FLOATS}
    assert kept("score > 0", encoded) == by_python(FLOATS, lambda value: value > 0)
    numbered = MemoryStorage({str(index): b"x" for index in range(COUNT)})
    table = pd.DataFrame({"key": np.arange(COUNT), "score": FLOATS})
    result = Loader(numbered, batch_size=4, sampling=Sampling(where=Where("score > 0", table=table))).storage.keys
    assert list(result) == [str(index) for index, value in enumerate(FLOATS) if value > 0]


def test_a_side_table_whose_column_names_are_not_text_is_refused_by_name(tmp_path: Any) -> None:
    # Found by the side-table fuzz target: pyarrow reads a CSV header as it is, and raises
    # UnicodeDecodeError only when its names are asked for.
    import pyarrow.csv

    path = tmp_path / "table.csv"
    path.write_bytes(b'"\xffkey","score"\n' + b"".join(f'"{key}",{value}\n'.encode() for key, value in zip(KEYS, FLOATS)))
    with pytest.raises(ConfigurationError, match="column names are not UTF-8"):
        kept("score > 0", pyarrow.csv.read_csv(path))


@pytest.mark.parametrize("form", ["arrow", "pandas"])
def test_a_side_table_column_of_text_that_is_not_utf8_is_refused_by_name(form: str) -> None:
    # Found by the side-table fuzz target: pyarrow's JSON reader keeps a string's bytes as they
    # are, and converting the column raised ArrowException ("Wrapping ... failed").
    import io
    import json

    import pyarrow.json

    lines = [json.dumps({"key": key, "lang": "en", "score": value}).encode() for key, value in zip(KEYS, FLOATS)]
    lines[3] = lines[3].replace(b'"en"', b'"e\xffn"')
    table = pyarrow.json.read_json(io.BytesIO(b"\n".join(lines)))
    with pytest.raises(ConfigurationError, match="column 'lang' cannot be read"):
        kept("lang == 'en'", table if form == "arrow" else table.to_pandas())
