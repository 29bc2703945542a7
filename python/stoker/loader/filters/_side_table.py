"""A filter's side table (`Where(expression, table=...)`): columns keyed by sample key, for
metadata the storage does not carry. A dict of sequences, a pandas DataFrame or a pyarrow Table,
made by the user from whatever file they read (Parquet, CSV, JSON Lines): outside input.

Every column comes out as one NumPy array a filter compares whole: numbers (nullable ones too, and
a list of numbers and None) as float64 with NaN for a missing value, anything else as objects with
None for one (pandas NA, Arrow nulls), so a missing value compares false, never raises. The key column is a key list
(`stoker._bounded.key_text`): text, UTF-8 bytes or numbers (as their text), and a null key, or a
key that is not text, is refused by name with its row.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..._bounded import key_text
from ...errors import ConfigurationError

__all__ = ["table_column", "table_keys", "table_names"]


def table_names(table: Any) -> list[str]:
    """The side table's column names: a pyarrow Table's, a DataFrame's, or a dict's keys.

    Raises:
        ConfigurationError: Names that are not text (pyarrow keeps a file's bytes as they are,
            and cannot decode them when asked).
    """
    try:
        if hasattr(table, "column_names"):  # pyarrow
            names = table.column_names
        elif hasattr(table, "columns"):  # pandas
            names = table.columns
        else:
            names = list(table)
    except UnicodeDecodeError as error:
        raise ConfigurationError(f"where: the side table's column names are not UTF-8 text ({error})") from None
    return [str(name) for name in names]


def table_column(table: Any, name: str) -> np.ndarray:
    """One column of the side table as an array, as long as its key column: float64 (NaN where
    missing) for numbers and booleans, else objects (None where missing).

    Raises:
        ConfigurationError: No such column, or one of another length than the keys.
    """
    if name not in table_names(table):
        raise ConfigurationError(f"where: the side table has no column {name!r} (columns: {', '.join(table_names(table))})")
    column = table.column(name) if hasattr(table, "column_names") else table[name]
    try:
        values = _array(column)
    except _unreadable() as error:  # text that is not UTF-8: Arrow's readers keep a file's bytes as they are
        raise ConfigurationError(f"where: the side table's column {name!r} cannot be read ({error!r:.200})") from None
    keys = len(table.column("key") if hasattr(table, "column_names") else table["key"])
    if len(values) != keys:
        raise ConfigurationError(f"where: the side table's column {name!r} holds {len(values):,} values for {keys:,} keys")
    return values


def _unreadable() -> tuple[type[BaseException], ...]:
    """What converting a column raises for data it cannot hold: Arrow's errors where pyarrow is
    loaded (a pyarrow table, or a DataFrame backed by Arrow), and a failed decode."""
    arrow = sys.modules.get("pyarrow")
    return (UnicodeDecodeError, *((arrow.ArrowException,) if arrow is not None else ()))


def _array(column: Any) -> np.ndarray:
    """A pyarrow (chunked) array, a pandas Series or a sequence as a NumPy array with missing
    values NaN (numbers) or None (anything else)."""
    if hasattr(column, "combine_chunks"):  # a pyarrow ChunkedArray
        column = column.combine_chunks()
    if hasattr(column, "is_null") and hasattr(column, "to_numpy"):  # pyarrow: nulls become NaN or None
        import pyarrow

        if pyarrow.types.is_boolean(column.type) and column.null_count:
            column = column.cast(pyarrow.float64())
        return np.asarray(column.to_numpy(zero_copy_only=False))
    if hasattr(column, "isna") and hasattr(column, "to_numpy"):  # pandas: NA, NaN and None
        if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iufb":
            return np.asarray(column)
        if getattr(column.dtype, "kind", "O") in "iufb":  # nullable Int64, Float64, boolean
            return np.asarray(column.to_numpy(dtype=np.float64, na_value=np.nan))
        return np.asarray(column.to_numpy(dtype=object, na_value=None))
    try:
        values = np.asarray(column)
    except ValueError:  # ragged (a tuple among texts): one object each
        values = np.empty(len(column), dtype=object)
        values[:] = list(column)
    if values.dtype == object and all(value is None or _is_number(value) for value in values.tolist()):
        return np.array([np.nan if value is None else float(value) for value in values.tolist()], dtype=np.float64)
    return values


def _is_number(value: object) -> bool:
    """A number a float holds (a bool too; not an integer past the range of floats)."""
    if not isinstance(value, (int, float, np.number)):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def table_keys(table: Any) -> np.ndarray:
    """The side table's key column as text (a NumPy array of str), each key checked.

    Raises:
        ConfigurationError: No key column, or a key that is null, not UTF-8, or neither text,
            bytes nor a number (named with its row).
    """
    raw = table_column(table, "key")
    if raw.dtype.kind in "iub" or (raw.dtype.kind == "U"):
        return raw.astype(str)
    keys = raw.astype(object)
    for row, value in enumerate(keys.tolist()):
        if isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and value == value:
            keys[row] = str(value)
        else:
            keys[row] = key_text(value, row, "where: the side table's key column")
    return keys.astype(str) if len(keys) else np.zeros(0, dtype=str)
