"""One comparison of a filter over whole columns: ``== != < <= > >=`` and ``in`` / ``not in`` a
list, each a boolean array with one value per sample, or a `ConfigurationError` naming the
comparison.

What NumPy alone gets wrong or raises on is settled here, so that any valid filter works:
- a missing value (None, as the side table gives pandas NA and Arrow nulls) in an ordering is
  false, as NaN is, and never ``TypeError``; ``!=`` is true for it, again as for NaN;
- a number past the range of floats (a filter may hold 4,000 digits), against which NumPy raises
  ``OverflowError``, is compared by its sign: every value a column holds is below a huge positive
  number but +inf, and above a huge negative one but -inf;
- ``in`` tests a column (``score in [1] in [1]`` asked NumPy to compare a list with a list).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import ConfigurationError

__all__ = ["COMPARISONS", "contained", "is_text", "ordered"]

COMPARISONS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
}
_FLIPPED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
    ast.Lt: ast.Gt,
    ast.LtE: ast.GtE,
    ast.Gt: ast.Lt,
    ast.GtE: ast.LtE,
}


def is_text(value: Any) -> bool:
    """Whether ``value`` is text: a text or object column, a string, or a list holding one."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "USO"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return any(isinstance(element, str) for element in value)
    return isinstance(value, str)


def contained(left: Any, right: Any, where: str) -> np.ndarray:
    """``left in right``: which of a column's values are among a list of constants.

    Raises:
        ConfigurationError: ``right`` is not a list of constants, or ``left`` not a column.
    """
    if not isinstance(right, list) or not all(isinstance(value, (int, float, str, bool)) for value in right):
        raise ConfigurationError(f"{where}: 'in' takes a list of constants, e.g. ['en', 'de']")
    if not isinstance(left, np.ndarray) or left.ndim != 1:
        raise ConfigurationError(f"{where}: 'in' tests a column, e.g. lang in ['en', 'de']")
    try:
        return np.isin(np.asarray(left, dtype=object) if is_text(left) else left, right)
    except (TypeError, ValueError, OverflowError):  # mixed kinds NumPy cannot sort: by equality, one by one
        allowed = set(right)
        return np.fromiter((value in allowed for value in left.tolist()), dtype=bool, count=len(left))


def ordered(operator: ast.cmpop, left: Any, right: Any, where: str) -> np.ndarray:
    """``left <operator> right`` (``== != < <= > >=``) for a column against a constant or a column.

    Raises:
        ConfigurationError: A list, text against a number, two constants, or values that do
            not compare (mixed kinds in one column).
    """
    if isinstance(left, list) or isinstance(right, list):
        raise ConfigurationError(f"{where}: a list is compared only with 'in' or 'not in'")
    if is_text(left) != is_text(right) and not (is_text(left) and right is None):
        raise ConfigurationError(f"{where}: compares text with a number")
    kind = type(operator)
    try:
        outcome = _null_safe(kind, left, right)
    except OverflowError:
        outcome = _past_floats(kind, left, right, where)
    except (TypeError, ValueError) as error:  # mixed kinds in a column
        raise ConfigurationError(f"{where}: cannot be compared ({error})") from None
    if not isinstance(outcome, np.ndarray):
        raise ConfigurationError(f"{where}: compares two constants; name a column")
    return outcome.astype(bool, copy=False)


def _null_safe(kind: type[ast.cmpop], left: Any, right: Any) -> Any:
    """The comparison, with a missing value (None in an object column) false in an ordering."""
    function = COMPARISONS[kind]
    try:
        return function(left, right)
    except TypeError:  # None against a value in an ordering (or kinds that never compare: raised again below)
        if kind in (ast.Eq, ast.NotEq):
            raise
    missing = None
    for side in (left, right):
        if isinstance(side, np.ndarray) and side.dtype == object:
            absent = np.fromiter((value is None for value in side.tolist()), dtype=bool, count=len(side))
            missing = absent if missing is None else missing | absent
    if missing is None or not missing.any():
        return function(left, right)  # no None: what failed fails again, and is named
    present = ~missing
    outcome = np.zeros(len(missing), dtype=bool)
    pick = lambda side: side[present] if isinstance(side, np.ndarray) else side  # noqa: E731
    outcome[present] = function(pick(left), pick(right))
    return outcome


def _huge(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max


def _past_floats(kind: type[ast.cmpop], left: Any, right: Any, where: str) -> np.ndarray:
    """A numeric column against an integer past the range of floats, by its sign (module notes)."""
    if _huge(left):
        left, right, kind = right, left, _FLIPPED[kind]
    if not _huge(right) or not isinstance(left, np.ndarray) or left.dtype.kind not in "iufb":
        raise ConfigurationError(f"{where}: cannot be compared (a number out of range)")
    column = left.astype(np.float64)
    if kind is ast.Eq:
        return np.zeros(len(column), dtype=bool)
    if kind is ast.NotEq:
        return np.ones(len(column), dtype=bool)
    if kind in (ast.Lt, ast.LtE):  # below +huge: anything but +inf and NaN; below -huge: -inf
        return column < np.inf if right > 0 else column == -np.inf
    return column == np.inf if right > 0 else column > -np.inf
