"""`Sampling(where=...)`: a filter over the metadata the storage carries, worked out once over its
index, never per read.

A filter is an expression over column names, ``"aesthetic >= 5.5 and width >= 512"``,
``"language in ['en', 'de']"``: comparisons (``== != < <= > >=``, chained), ``in`` / ``not in``
a list, ``and``, ``or``, ``not``, parentheses, numbers, text and true/false. It is parsed by
Python's parser and evaluated by this module over whole columns (NumPy), never by `eval`: a
filter string from a config file can name columns and constants, nothing else. The columns come
from the storage (Parquet, Lance, ``save_to_disk`` and MDS columns: `read_values`, else the numeric
`read_column`; the fields of WebDataset ``json`` members, ``meta.aesthetic`` for a nested one:
`member_fields`) or from a side table keyed by sample key (`Where(expression, table=...)`), for
any storage. A column the storage says has class names (`column_classes`: a Hugging Face
``ClassLabel``, integers on disk) is compared with ``==``, ``!=``, ``in`` and ``not in`` by its
class names as well as its integers: ``label in ['cat']`` is ``label in [0]``.

The samples kept are one index array (`FilteredStorage`), so the Loader's sampling, equal counts
per rank, exact resume and fingerprint all work over them as over any storage; the filter is
part of the fingerprint (a state saved under another filter is refused, saying so).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._bounded import shown, shown_logger
from ...errors import ConfigurationError, StorageError
from ...storage import BlockStorage, FilteredStorage, MemberStorage, Storage, member_fields
from ._comparisons import COMPARISONS, contained, ordered
from ._side_table import table_column, table_keys, table_names

__all__ = ["Where", "filter_storage"]

_logger = shown_logger("stoker.loader")

_LONGEST = 4000  # characters of a filter: longer is not a filter someone wrote


@dataclass(frozen=True)
class Where:
    """A filter (see the module notes), with the side table its columns may come from.

    Args:
        expression: The filter, e.g. ``"aesthetic >= 5.5 and width >= 512"``.
        table: Columns keyed by sample key, for metadata the storage does not carry:
            ``{"key": [...], "aesthetic": [...]}`` (a dict of sequences, a pandas DataFrame or a
            pyarrow Table with a ``key`` column). A sample missing from it is not kept.
    """

    expression: str
    table: Any = field(default=None, compare=False)


def filter_storage(storage: Storage, where: str | Where) -> FilteredStorage:
    """``storage``'s samples that ``where`` keeps, worked out now over its columns.

    Raises:
        ConfigurationError: A filter that does not parse, uses anything but columns and
            constants, names a column the storage (or table) does not have, compares text with
            numbers, or keeps nothing; each named.
    """
    rule = where if isinstance(where, Where) else Where(where)
    if not isinstance(rule.expression, str) or not rule.expression.strip() or len(rule.expression) > _LONGEST:
        raise ConfigurationError(f"where: a filter expression (text up to {_LONGEST} characters), got {str(rule.expression)[:80]!r}")
    try:
        tree = ast.parse(rule.expression.strip(), mode="eval")
    except SyntaxError as error:
        raise ConfigurationError(f"where {rule.expression!r}: does not parse ({error.msg})") from None
    except (RecursionError, MemoryError, ValueError) as error:  # nesting past the parser's limits, a NUL character
        raise ConfigurationError(f"where {rule.expression[:80]!r}: does not parse ({type(error).__name__})") from None
    columns = _Columns(storage, rule.table, sorted(_column_names(tree.body)))
    try:
        kept = _evaluate(tree.body, columns, rule.expression)
    except RecursionError:
        raise ConfigurationError(f"where {rule.expression[:80]!r}...: nested too deeply") from None
    if not isinstance(kept, np.ndarray) or kept.dtype != bool or kept.shape != (len(storage),):
        raise ConfigurationError(f"where {rule.expression!r}: not a condition on each sample (a comparison, or several joined by and/or)")
    indices = np.flatnonzero(kept)
    if len(indices) == 0:
        raise ConfigurationError(f"where {rule.expression!r}: keeps none of the {len(storage):,} samples of {storage.describe()}")
    _logger.info(
        "where %s: kept %d of %d samples (%.1f%%), dropped %d",
        rule.expression,
        len(indices),
        len(storage),
        100 * len(indices) / len(storage),
        len(storage) - len(indices),
    )
    return FilteredStorage.of(storage, indices, rule.expression)


class _Columns:
    """Whole columns by name, read once each: from the side table, else from the storage."""

    def __init__(self, storage: Storage, table: Any, names: list[str]) -> None:
        self.storage, self.table = storage, table
        self._read: dict[str, np.ndarray] = {}
        self._rows: np.ndarray | None = None  # each sample's row in the table (-1: not there)
        in_table = table_names(table) if table is not None else []
        if not _has_columns(storage) and isinstance(storage, MemberStorage) and any(name not in in_table for name in names):
            # the fields of every sample's json member, all in one pass over the members
            self._read.update(member_fields(storage, [name for name in names if name not in in_table]))

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._read:
            self._read[name] = (
                self._from_table(name) if self.table is not None and name in table_names(self.table) else self._from_storage(name)
            )
        return self._read[name]

    def classes(self, name: str) -> list[str] | None:
        """The class names of column ``name`` where the storage has them (a Hugging Face
        ``ClassLabel``: integers on disk, names to people); None for a side table's column."""
        if self.table is not None and name in table_names(self.table):
            return None
        named = getattr(self.storage, "column_classes", None)
        return named(name) if callable(named) else None

    def _from_storage(self, name: str) -> np.ndarray:
        reader = getattr(self.storage, "read_values", None) or getattr(self.storage, "read_column", None)
        if reader is None:
            raise ConfigurationError(
                f"where: {self.storage.describe()} carries no columns to filter on (nor json members beside its samples); "
                "give them as Where(expression, table=...) keyed by sample key"
            )
        try:
            return np.asarray(reader(name))
        except StorageError as error:
            raise ConfigurationError(f"where: {error}") from None

    def _from_table(self, name: str) -> np.ndarray:
        if self._rows is None:
            keys = table_keys(self.table)
            order = np.argsort(keys, kind="stable")
            sorted_keys = keys[order]
            repeated = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
            if len(repeated):
                raise ConfigurationError(f"where: the side table names key {str(sorted_keys[repeated[0]])!r} more than once")
            wanted = np.asarray(list(self.storage.keys)).astype(str)
            at = np.clip(np.searchsorted(sorted_keys, wanted), 0, max(len(sorted_keys) - 1, 0))
            found = (sorted_keys[at] == wanted) if len(sorted_keys) else np.zeros(len(wanted), bool)
            self._rows = np.where(found, order[at] if len(order) else 0, -1)
            if not found.all():
                _logger.info("where: %d samples are not in the side table: not kept", int((~found).sum()))
        values = table_column(self.table, name)
        rows = self._rows
        if len(values) == 0:  # a side table of no rows: no sample is in it, so none is kept
            return np.full(len(rows), np.nan) if values.dtype.kind in "iufb" else np.full(len(rows), None, dtype=object)
        if values.dtype.kind in "iufb":
            out = values.astype(np.float64)[np.maximum(rows, 0)]
            out[rows < 0] = np.nan  # compares false with anything: not kept
            return out
        picked = values.astype(object)[np.maximum(rows, 0)]
        picked[rows < 0] = None
        return picked


def _has_columns(storage: Storage) -> bool:
    return callable(getattr(storage, "read_values", None)) or callable(getattr(storage, "read_column", None))


def _column_names(tree: ast.AST) -> set[str]:
    """The columns a filter names (``meta.aesthetic`` as one, not also ``meta``); a walk with a
    stack of its own, so a filter nested past any sense reaches the named error, not Python's
    recursion limit."""
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Attribute) or isinstance(node, ast.Name):
            name = _dotted(node)
            if name is not None:
                if name not in ("true", "false"):
                    names.add(name)
                continue
        stack.extend(ast.iter_child_nodes(node))
    return names


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` from a chain of attributes over a name, without recursion; None otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _evaluate(node: ast.AST, columns: _Columns, expression: str) -> Any:
    """The value of ``node``: a column (array), a constant, or a condition (bool array)."""
    if isinstance(node, ast.BoolOp):
        parts = [_condition(value, columns, expression) for value in node.values]
        return np.logical_and.reduce(parts) if isinstance(node.op, ast.And) else np.logical_or.reduce(parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ~_condition(node.operand, columns, expression)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = _evaluate(node.operand, columns, expression)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    if isinstance(node, ast.Compare):
        return _compare(node, columns, expression)
    if isinstance(node, ast.Name) and node.id in ("true", "false"):
        return node.id == "true"
    if isinstance(node, (ast.Name, ast.Attribute)) and (name := _dotted(node)):
        return columns[name]
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(element, columns, expression) for element in node.elts]
    raise ConfigurationError(
        f"where {expression!r}: {ast.unparse(node)!r} is not a column, a constant or a comparison "
        "(a filter holds columns, constants, == != < <= > >=, in, not in, and, or, not)"
    )


def _condition(node: ast.AST, columns: _Columns, expression: str) -> np.ndarray:
    value = _evaluate(node, columns, expression)
    if not isinstance(value, np.ndarray) or value.dtype != bool:
        raise ConfigurationError(f"where {expression!r}: {ast.unparse(node)!r} is not a condition (a comparison)")
    return value


def _compare(node: ast.Compare, columns: _Columns, expression: str) -> np.ndarray:
    left_node: ast.AST = node.left
    left = _evaluate(left_node, columns, expression)
    results = []
    for operator, right_node in zip(node.ops, node.comparators):
        right = written = _evaluate(right_node, columns, expression)
        where = f"where {expression!r}: {ast.unparse(node)!r}"
        if isinstance(operator, (ast.In, ast.NotIn, ast.Eq, ast.NotEq)):
            left, right = _class_numbers(left, right_node, columns, where), _class_numbers(right, left_node, columns, where)
        if isinstance(operator, (ast.In, ast.NotIn)):
            found = contained(left, right, where)
            results.append(found if isinstance(operator, ast.In) else ~found)
        elif type(operator) in COMPARISONS:
            results.append(ordered(operator, left, right, where))
        else:
            raise ConfigurationError(f"{where}: {type(operator).__name__} is not a comparison a filter takes")
        left, left_node = written, right_node  # a chain goes on from the value as written
    return np.logical_and.reduce(results)


def _class_numbers(value: Any, other: ast.AST, columns: _Columns, where: str) -> Any:
    """``value`` as the column ``other`` stores it where ``other`` is a ``ClassLabel`` column
    and ``value`` names its classes (``label == 'cat'``, ``label in ['cat', 'dog']``): each
    class name as its integer; integers, and anything compared with another column, as they are.

    Raises:
        ConfigurationError: A name that is not one of the column's classes (a typo would
            otherwise keep nothing, or everything with ``!=``).
    """
    name = _dotted(other) if isinstance(other, (ast.Name, ast.Attribute)) else None
    if name is None or not isinstance(value, (str, list)):
        return value
    classes = columns.classes(name)
    if not classes:
        return value
    numbers = {label: number for number, label in enumerate(classes)}

    def number(item: Any) -> Any:
        if not isinstance(item, str):
            return item
        if item not in numbers:
            listed = ", ".join(f"'{shown(label, 80)}'" for label in classes[:20])
            more = f" and {len(classes) - 20} more" if len(classes) > 20 else ""
            raise ConfigurationError(f"{where}: {name!r} has no class {item!r} (its classes: {listed}{more})")
        return numbers[item]

    return [number(item) for item in value] if isinstance(value, list) else number(value)


def shuffle_quality(storage: FilteredStorage, shuffle: str, window: int) -> dict[str, float]:
    """How a filter changes what the shuffle mixes, as numbers (logged when the Loader is made):
    the uniform shuffle draws each sample from all kept ones, as unfiltered; the block shuffle
    mixes ``window`` blocks at a time, and a filter that thins every block shrinks that pool (a
    filter that keeps or drops whole blocks does not). Returns the samples mixed at a time, with
    and without the filter (``mixed``, ``mixed_unfiltered``), and the blocks kept of all."""
    if shuffle != "block":
        return {"mixed": float(len(storage)), "mixed_unfiltered": float(len(storage.base))}
    kept_blocks = storage.block_sizes() if isinstance(storage, BlockStorage) else None
    all_blocks = storage.base.block_sizes() if isinstance(storage.base, BlockStorage) else None
    if not kept_blocks or not all_blocks:
        return {"mixed": float(len(storage)), "mixed_unfiltered": float(len(storage.base))}
    mixed = min(len(storage), window * len(storage) / len(kept_blocks))
    mixed_unfiltered = min(len(storage.base), window * len(storage.base) / len(all_blocks))
    _logger.info(
        "where %s: the block shuffle mixes about %.0f samples at a time (%d blocks of a mean %.1f kept samples), %.0f unfiltered; "
        "%d of %d blocks keep samples%s",
        storage.description,
        mixed,
        window,
        len(storage) / len(kept_blocks),
        mixed_unfiltered,
        len(kept_blocks),
        len(all_blocks),
        " (a larger shuffle_window restores the mixing)" if mixed < 0.5 * mixed_unfiltered else "",
    )
    return {"mixed": mixed, "mixed_unfiltered": mixed_unfiltered, "blocks_kept": float(len(kept_blocks)), "blocks": float(len(all_blocks))}


def describe(where: str | Where | None) -> str | None:
    """The filter as the fingerprint records it."""
    if where is None:
        return None
    return where.expression if isinstance(where, Where) else where
