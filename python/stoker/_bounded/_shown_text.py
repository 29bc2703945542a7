"""Text from outside shown to a person: a terminal, an HTML page, a log line.

A sample key, a file name, a label value on a metrics page or a server's reason phrase is
somebody else's text. Printed raw, an ESC starts a terminal sequence (the window's title
rewritten, the screen cleared), a BEL rings, a carriage return or newline forges a log line, a
bidi override shows ``exe.txt`` as ``txt.exe``, a lone surrogate (a file name that is not UTF-8)
makes ``print`` raise, and a 5,000-digit value fills the screen. `shown` makes any such value safe
to show: every control character escaped visibly (``\\x1b``, ``\\n``, ``\\u202e``), the length
bounded with an ellipsis. Text with nothing to escape and within the bound comes back unchanged,
so a normal name reads as it always did.

Escaped: C0 (``\\x00``-``\\x1f``; ``\\n``, ``\\r`` and ``\\t`` by those names), DEL, C1
(``\\x80``-``\\x9f``), the bidi controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069),
the line and paragraph separators (U+2028, U+2029) and lone surrogates (the bytes of a non-UTF-8
file name, ``\\udcff``, shown as ``\\xff``).
"""

from __future__ import annotations

import html
import re

__all__ = ["SHOWN_LIMIT", "shown", "shown_html"]

# Characters of one outside value (a key, a file name, a label, a server's message) shown in a
# line: enough for any real one, a bound for a hostile one.
SHOWN_LIMIT = 300
_ELLIPSIS = "\u2026"
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
# The same, newlines excepted: text stoker composed over several lines (a table, a traceback).
_UNSAFE_IN_LINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# An escape cut in two by the length bound, at the end of the cut text.
_TORN_ESCAPE = re.compile(r"\\(?:x[0-9a-f]?|u[0-9a-f]{0,3})?$")


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    named = _NAMED.get(character)
    if named is not None:
        return named
    point = ord(character)
    if 0xDC80 <= point <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{point - 0xDC00:02x}"
    return f"\\x{point:02x}" if point <= 0xFF else f"\\u{point:04x}"


def shown(value: str | bytes | object, limit: int = SHOWN_LIMIT, *, lines: bool = False) -> str:
    """``value`` as a person may be shown it: control characters escaped, at most ``limit``
    characters (the last an ellipsis when it was cut).

    Costs the bound, not the value: a value of a gigabyte is read only as far as ``limit``.

    Args:
        value: Text, bytes (UTF-8; other bytes shown as ``\\xff``), or any object (its ``str``).
        limit: Characters shown at most (at least 2).
        lines: Keep newlines (text stoker composed over several lines, each line from outside
            already one line); everything else is escaped all the same.

    Returns:
        The text to show: ``value`` itself when nothing needed escaping or cutting.
    """
    limit = max(2, limit)
    if isinstance(value, (bytes, bytearray, memoryview)):
        # Four bytes at most make one character: this many always fill the bound.
        data = bytes(value[: limit * 4])
        text = data.decode("utf-8", "backslashreplace")
        longer = len(value) > len(data)
    else:
        text = value if isinstance(value, str) else str(value)
        longer = False
    unsafe = _UNSAFE_IN_LINES if lines else _UNSAFE
    head = text[:limit]
    longer = longer or len(text) > limit
    if not longer and unsafe.search(head) is None:
        return text
    escaped = unsafe.sub(_escape, head)
    if not longer and len(escaped) <= limit:
        return escaped
    return _TORN_ESCAPE.sub("", escaped[: limit - 1]) + _ELLIPSIS


def shown_html(value: str | bytes | object, limit: int = SHOWN_LIMIT) -> str:
    """`shown`, then escaped for HTML (``<``, ``>``, ``&`` and quotes): for a page's text and its
    attributes alike."""
    return html.escape(shown(value, limit))
