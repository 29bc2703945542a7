"""What Arrow-backed storages (Parquet files, Hugging Face ``save_to_disk`` folders) share about
their other columns: a column's values for a filter (`Sampling(where=...)`), a row's columns as
its members (``Loader(extra=("text",))``), and a ``ClassLabel`` column's class names. One rule
for each, so a dataset filters and reads extras alike whichever of the two files hold it.

A column is read a block at a time (a Parquet row group, an Arrow file), each block once into a
cache bounded in bytes; a row's members are then picked from it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ..errors import StorageError
from .policies import BlockCache

__all__ = ["class_label_names", "filter_values", "member_columns"]


def class_label_names(features: Any) -> dict[str, list[str]]:
    """Each ``ClassLabel`` feature's class names, from Hugging Face's features (``dataset_info.json``'s
    ``features``, or a Parquet or Arrow schema's ``huggingface`` metadata's ``info.features``);
    anything else in them is left out."""
    if not isinstance(features, dict):
        return {}
    return {
        str(name): [str(label) for label in feature["names"]]
        for name, feature in features.items()
        if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list)
    }


def filter_values(column: Any) -> np.ndarray:
    """A column (an Arrow array or chunked array) as a filter reads it: numbers as float64 (NaN
    where null), text, true/false and the rest as an object array (None where null)."""
    import pyarrow as pa

    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
        return np.asarray(column.cast(pa.float64()).fill_null(float("nan")).to_numpy(), dtype=np.float64)
    return np.asarray(column.to_numpy(zero_copy_only=False)).astype(object)


def member_columns(
    indices: Sequence[int],
    columns: Sequence[str],
    *,
    available: Sequence[str],
    where: str,
    locate: Callable[[int], tuple[Any, int]],
    load: Callable[[Any, Sequence[str]], Any],
    cache: BlockCache,
    row_name: Callable[[Any, int], str],
    block_name: Callable[[Any], str],
) -> list[dict[str, Any] | Exception]:
    """The ``columns`` of each row at ``indices`` as ``{column: value}`` (text as str, binary as
    bytes, a struct as a dict), read a block at a time (`MemberStorage`); an exception in place
    of a row whose column is null or whose block cannot be read, and for every row where a
    column does not exist.

    Args:
        indices: The rows, in storage order.
        columns: The columns asked for (``extra=``).
        available: Every column the dataset has, for the message naming a missing one.
        where: The dataset, for messages.
        locate: A row's block and its place in it.
        load: A block's ``columns``, as an Arrow table.
        cache: Where loaded blocks are held (keyed by block and columns).
        row_name: A row's name, from its block and place, for messages.
        block_name: A block's name, for messages.

    Raises:
        StorageError: A column the dataset does not have, when ``indices`` is empty (the
            Loader's check of ``extra=`` when it is made); with rows, each gets the error.
    """
    missing = [column for column in columns if column not in available]
    if missing:
        error = StorageError(f"{where}: no column {missing[0]!r} (columns: {', '.join(available)})")
        if not indices:  # asked for no row (the Loader's check when it is made): refused now, not per sample later
            raise error
        return [error for _ in indices]
    results: list[dict[str, Any] | Exception] = [{} for _ in indices]
    by_block: dict[Hashable, list[tuple[int, int]]] = {}
    for slot, index in enumerate(indices):
        block, offset = locate(index)
        by_block.setdefault(block, []).append((slot, offset))
    for block, wanted in by_block.items():
        try:
            table = cache.get((block, tuple(columns)), lambda: load(block, columns))  # noqa: B023 - called at once
            read = {column: table.column(column) for column in columns}
            for slot, offset in wanted:
                values = {column: values[offset].as_py() for column, values in read.items()}
                empty = [column for column, value in values.items() if value is None]
                results[slot] = StorageError(f"{row_name(block, offset)}: column {empty[0]!r} is empty (null)") if empty else values
        except Exception as error:  # pyarrow's errors for a damaged block; UTF-8 that is not
            for slot, _ in wanted:
                results[slot] = StorageError(
                    f"{block_name(block)}: columns {list(columns)} cannot be read ({type(error).__name__}: {error})"
                )
    return results
