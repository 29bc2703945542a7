"""Brace patterns (``shard-{000000..999999}.tar``, ``{train,val}/{a..f}.tar``) as lazy sequences:
the pattern is parsed once into a tree, its count is computed, and the i-th expansion is worked
out when asked for, so a pattern of 10^7 names holds no string per name (``braceexpand`` builds
each range whole before the first name, and a list of the names took 3.8 GB at 10^7).

The expansion is braceexpand's (the one WebDataset uses), name for name and in its order:
``{000..099}`` keeps the zeros (the wider bound's width, when either bound starts with 0),
``{a..e}`` and ``{Z..a}`` letter ranges (``A-Za-z`` only), ``..step`` (its sign ignored, 0 is
1), ``{a,b}`` alternatives nested to any depth, ``{x}`` and ``{}`` kept as text, a backslash
escaping the next character (removed from the names), unbalanced braces refused. A test compares
the two on random patterns.
"""

from __future__ import annotations

import bisect
import math
import operator
import os
import re
import string
from collections.abc import Iterator, Sequence
from itertools import chain, cycle, repeat
from typing import overload

from ....errors import ConfigurationError

__all__ = ["MAX_BOUND_DIGITS", "MAX_NESTING", "BracePattern"]

MAX_BOUND_DIGITS = 100
"""The most digits a range's bound or step may have: more is no file name, and Python refuses to
read a number of more than 4,300 digits (a ``ValueError`` that named nothing)."""

_LETTERS = string.ascii_uppercase + string.ascii_lowercase
_INT_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.-?(\d+))?$")
_LETTER_RANGE = re.compile(r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.-?(\d+))?$")
_ESCAPE = re.compile(r"\\(.)")
MAX_NESTING = 32
"""Braces nested deeper than this are refused by name (the parser, as braceexpand's, recurses)."""
_HELD = 1 << 14
"""While iterating, the expansions of the last parts of a pattern are built once and reused when
they number at most this many (a 10^7 range is iterated again for each of its prefixes)."""


class _Node:
    """A part of a pattern: ``count`` expansions, the i-th by `at`, all in order by `strings`."""

    count: int

    def at(self, index: int) -> str:
        raise NotImplementedError

    def strings(self) -> Iterator[str]:
        raise NotImplementedError

    def widths(self) -> tuple[int, int]:
        """The shortest and longest expansion's length."""
        raise NotImplementedError

    def distinct(self) -> bool:
        """Whether every expansion is known to differ from the others (False: not known)."""
        raise NotImplementedError

    def common(self) -> tuple[str, bool]:
        """A start every expansion shares, and whether all expansions are that one string. The
        start is their longest common prefix, or a part of it that leaves out none of its
        slashes (what a folder needs)."""
        raise NotImplementedError


class _Text(_Node):
    def __init__(self, text: str) -> None:
        self.text, self.count = text, 1

    def at(self, index: int) -> str:
        return self.text

    def strings(self) -> Iterator[str]:
        yield self.text

    def widths(self) -> tuple[int, int]:
        return len(self.text), len(self.text)

    def distinct(self) -> bool:
        return True

    def common(self) -> tuple[str, bool]:
        return self.text, True


class _Numbers(_Node):
    """``{first..last..step}``: Python's ``range`` computes the i-th number; ``format`` pads it."""

    def __init__(self, numbers: range, width: int) -> None:
        self.numbers, self.format = numbers, f"%0{width}d"
        self.count = len(numbers)

    def at(self, index: int) -> str:
        return self.format % self.numbers[index]

    def strings(self) -> Iterator[str]:
        return map(self.format.__mod__, self.numbers)

    def widths(self) -> tuple[int, int]:
        ends = [len(self.format % self.numbers[0]), len(self.format % self.numbers[-1])]
        if self.numbers[0] < 0 < self.numbers[-1] or self.numbers[-1] < 0 < self.numbers[0]:
            ends.append(len(self.format % 0))  # the narrowest number is 0, between them
        return min(ends), max(ends)

    def distinct(self) -> bool:
        return True  # distinct numbers print distinctly

    def common(self) -> tuple[str, bool]:
        return (self.at(0), True) if self.count == 1 else ("", False)  # numbers hold no slash


class _Letters(_Node):
    def __init__(self, letters: str) -> None:
        self.letters, self.count = letters, len(letters)

    def at(self, index: int) -> str:
        return self.letters[index]

    def strings(self) -> Iterator[str]:
        return iter(self.letters)

    def widths(self) -> tuple[int, int]:
        return 1, 1

    def distinct(self) -> bool:
        return True

    def common(self) -> tuple[str, bool]:
        return (self.letters, True) if self.count == 1 else ("", False)


class _Sequence(_Node):
    """Parts one after another: every combination, the last part changing fastest. With
    ``escaped``, backslash escapes are removed from each combination, at every level of nesting
    as braceexpand does (an escape in an alternative is removed once per level around it)."""

    def __init__(self, parts: list[_Node], escaped: bool) -> None:
        self.parts, self.escaped = parts, escaped
        self.count = math.prod(part.count for part in parts)
        self._backwards = [(part, part.count) for part in reversed(parts)]

    def at(self, index: int) -> str:
        pieces = []
        for part, count in self._backwards:
            if count == 1:
                pieces.append(part.at(0))
            else:
                index, digit = divmod(index, count)
                pieces.append(part.at(digit))
        pieces.reverse()
        text = "".join(pieces)
        return _ESCAPE.sub(r"\1", text) if self.escaped else text

    def strings(self) -> Iterator[str]:
        if self.escaped:
            return (_ESCAPE.sub(r"\1", text) for text in _combinations(self.parts))
        return _combinations(self.parts)

    def widths(self) -> tuple[int, int]:
        ends = [part.widths() for part in self.parts]
        return sum(low for low, _ in ends), sum(high for _, high in ends)

    def distinct(self) -> bool:
        # Parts of one width each cut every name at the same places, so a name tells each part's
        # expansion; one part of varying width is then what is left between the others.
        varying = sum(1 for part in self.parts if part.widths()[0] != part.widths()[1])
        return varying <= 1 and all(part.distinct() for part in self.parts)

    def common(self) -> tuple[str, bool]:
        start = []
        for part in self.parts:
            text, alike = part.common()
            start.append(text)
            if not alike:
                return "".join(start), False
        return "".join(start), True


class _Choice(_Node):
    """``{a,b,c}``: each alternative's expansions in turn."""

    def __init__(self, options: list[_Node]) -> None:
        self.options = options
        self.starts = [0]
        for option in options:
            self.starts.append(self.starts[-1] + option.count)
        self.count = self.starts[-1]

    def at(self, index: int) -> str:
        number = bisect.bisect_right(self.starts, index) - 1
        return self.options[number].at(index - self.starts[number])

    def strings(self) -> Iterator[str]:
        for option in self.options:
            yield from option.strings()

    def widths(self) -> tuple[int, int]:
        ends = [option.widths() for option in self.options]
        return min(low for low, _ in ends), max(high for _, high in ends)

    def common(self) -> tuple[str, bool]:
        starts = [option.common() for option in self.options]
        shared = os.path.commonprefix([text for text, _ in starts])
        return shared, all(alike and text == shared for text, alike in starts)

    def distinct(self) -> bool:
        # Alternatives of plain text only (the common {train,val}): distinct when no two are equal.
        texts = [_plain_text(option) for option in self.options]
        return None not in texts and len(set(texts)) == len(texts)


def _plain_text(node: _Node) -> str | None:
    """The one expansion of a part that is text alone (an alternative such as ``train``)."""
    if isinstance(node, _Text):
        return node.text
    if isinstance(node, _Sequence) and all(isinstance(part, _Text) for part in node.parts):
        return "".join(part.text for part in node.parts)  # type: ignore[attr-defined]
    return None


def _combinations(parts: list[_Node]) -> Iterator[str]:
    """Every combination of ``parts`` in order, holding at most about `_HELD` strings: the last
    parts' combinations are built once when they are few, a larger part iterated again for each
    combination of those before it. The loops are ``map`` and ``itertools``, not Python frames
    (about a third of a microsecond a name)."""
    if not parts:
        return iter([""])
    tail, first = [""], len(parts)
    while first and len(tail) * parts[first - 1].count <= _HELD:
        first -= 1
        tail = [head + rest for head in parts[first].strings() for rest in tail]
    if first == 0:
        return iter(tail)
    if first == len(parts):  # the last part alone is too many to hold
        last = parts[-1]
        if len(parts) == 1:
            return last.strings()
        return chain.from_iterable(map(head.__add__, last.strings()) for head in _combinations(parts[:-1]))
    heads = _combinations(parts[:first])
    if len(tail) == 1:
        return map(operator.add, heads, repeat(tail[0]))
    return map(operator.add, chain.from_iterable(map(repeat, heads, repeat(len(tail)))), cycle(tail))


class BracePattern(Sequence[str]):
    """One brace pattern, expanded lazily (see the module notes): a sequence of its expansions.
    Immutable once made.

    Args:
        pattern: The pattern, e.g. ``https://host/shard-{000000..000999}.tar``.

    Raises:
        ConfigurationError: Unbalanced braces, braces nested deeper than `MAX_NESTING`, or a
            range bound or step of more than `MAX_BOUND_DIGITS` digits (each named with the
            pattern).
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._escaped = "\\" in pattern
        self._root = self._sequence(pattern)
        self.size: int = self._root.count  # may pass what len() can return: checked first
        prefix = self.literal_prefix()
        self._rest = _Sequence(self._root.parts[1:], False) if prefix else self._root

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._root.at(position) for position in range(*index.indices(self.size))]
        if not -self.size <= index < self.size:
            raise IndexError(f"{self.pattern!r} has {self.size} expansions, not {index}")
        return self._root.at(index % self.size)

    def __iter__(self) -> Iterator[str]:
        return self._root.strings()

    def rest_at(self, index: int) -> str:
        """The ``index``-th expansion after `literal_prefix` (``index`` in range)."""
        return self._rest.at(index)

    def rests(self) -> Iterator[str]:
        """Every expansion after `literal_prefix`, in order (cheaper than slicing each)."""
        return self._rest.strings()

    def distinct(self) -> bool:
        """Whether the expansions are known to differ from each other without listing them (a
        pattern of one range and text, or of ranges of one width: the usual forms); False when
        not known."""
        return not self._escaped and self._root.distinct()

    def shortest(self) -> int:
        """The length of the shortest expansion before escapes are removed: exact for a pattern
        without a backslash, and 0 only if an expansion is empty (removing an escape leaves the
        character it escaped)."""
        return self._root.widths()[0]

    def common_start(self) -> str:
        """A start every expansion shares: their longest common prefix, or a part of it that
        leaves out none of its slashes (so the folder every expansion is in is known without
        listing them). "" with a backslash in the pattern."""
        return "" if self._escaped else self._root.common()[0]

    def literal_suffix(self) -> str:
        """The text every expansion ends with, after the last brace ("" with a backslash in the
        pattern)."""
        last = self._root.parts[-1] if self._root.parts else None
        return last.text if isinstance(last, _Text) and not self._escaped else ""

    def literal_prefix(self) -> str:
        """The text every expansion starts with, up to the first brace ("" with a backslash in
        the pattern: escapes change the names)."""
        first = self._root.parts[0] if self._root.parts else None
        return first.text if isinstance(first, _Text) and not self._escaped else ""

    def characters(self) -> set[str]:
        """Every character an expansion may hold after `literal_prefix` (a superset)."""
        found: set[str] = set()
        stack = self._root.parts[1:] if self.literal_prefix() else list(self._root.parts)
        while stack:
            node = stack.pop()
            if isinstance(node, _Text):
                found.update(node.text)
            elif isinstance(node, _Numbers):
                found.update("-0123456789")
            elif isinstance(node, _Letters):
                found.update(node.letters)
            elif isinstance(node, _Sequence):
                stack.extend(node.parts)
            elif isinstance(node, _Choice):
                stack.extend(node.options)
        return found

    # ---- parsing, as braceexpand's parse_pattern, parse_expression and parse_sequence ----------

    def _sequence(self, pattern: str, nesting: int = 0) -> _Sequence:
        if nesting > MAX_NESTING:
            raise ConfigurationError(f"{self.pattern[:120]!r}: braces nested more than {MAX_NESTING} deep")
        start = position = depth = 0
        parts: list[_Node] = []
        while position < len(pattern):
            character = pattern[position]
            if character == "\\":
                position += 2
                continue
            if character == "{":
                if depth == 0 and position > start:
                    parts.append(_Text(pattern[start:position]))
                    start = position
                depth += 1
            elif character == "}":
                depth -= 1
                if depth == 0:
                    inside = pattern[start + 1 : position]
                    group = self._group(inside, nesting)
                    parts.extend([_Text("{"), self._sequence(inside, nesting + 1), _Text("}")] if group is None else [group])
                    start = position + 1
            position += 1
        if depth != 0:
            raise ConfigurationError(f"{self.pattern!r}: unbalanced braces")
        if start < position:
            parts.append(_Text(pattern[start:]))
        return _Sequence(parts, self._escaped)

    def _group(self, inside: str, nesting: int) -> _Node | None:
        numbers = _INT_RANGE.match(inside)
        if numbers is not None:
            first, last, step = numbers.groups()
            self._check_digits(first, last, step)
            padded = any(bound.startswith(("0", "-0")) for bound in (first, last) if bound not in ("0", "-0"))
            width = max(len(first), len(last)) if padded else 0
            every = (int(step) or 1) if step else 1
            low, high = int(first), int(last)
            return _Numbers(range(low, high + 1, every) if low < high else range(low, high - 1, -every), width)
        letters = _LETTER_RANGE.match(inside)
        if letters is not None:
            first, last, step = letters.groups()
            self._check_digits(step)
            every = (int(step) or 1) if step else 1
            low, high = _LETTERS.index(first), _LETTERS.index(last)
            if low < high:
                return _Letters(_LETTERS[low : high + 1 : every])
            return _Letters(_LETTERS[low : (high or -len(_LETTERS)) - 1 : -every])
        return self._choice(inside, nesting)

    def _choice(self, inside: str, nesting: int) -> _Choice | None:
        start = position = depth = 0
        options: list[_Node] = []
        while position < len(inside):
            character = inside[position]
            if character == "\\":
                position += 2
                continue
            if character == "{":
                depth += 1
            elif character == "}":
                depth -= 1
            elif character == "," and depth == 0:
                options.append(self._sequence(inside[start:position], nesting + 1))
                start = position + 1
            position += 1
        if depth != 0 or not options:
            return None
        options.append(self._sequence(inside[start:], nesting + 1))
        return _Choice(options)

    def _check_digits(self, *numbers: str | None) -> None:
        for number in numbers:
            if number is not None and len(number.lstrip("-")) > MAX_BOUND_DIGITS:
                raise ConfigurationError(
                    f"{self.pattern[:120]!r}: a brace range's bound or step of {len(number.lstrip('-')):,} digits "
                    f"(at most {MAX_BOUND_DIGITS}); is the range mistyped?"
                )
