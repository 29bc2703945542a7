"""Reading JSON stoker did not write in this process, within bounds: size, nesting depth, and the
digits of a number.

The standard library's parser is fast, but on hostile input it fails in ways no caller names:
nesting a few thousand deep is a ``RecursionError`` (and a structure nested under that limit is one
later, in any code that walks it), a number of 5,000 digits is the interpreter's digit-limit
``ValueError``, and the parser holds the whole text however large. Every reader of outside JSON
(indexes, states, metadata, manifests, ledgers, configs, documents) goes through `parse_json`
or `read_json`, which refuse those before the parser runs, with a `JsonError` naming the source
and the bound.

How, and why this way (measured by ``benchmarks/storage/json_reader.py`` on the largest JSON stoker
reads: indexes of 100,000 shards, a manifest of a million objects, documents a line at a time): the
parser is the standard library's, unchanged, so what parses is what parsed before (NaN, big
integers, duplicate keys, all as ``json.loads``). The bounds are checked on the bytes first, with
C string operations and one numpy pass, no Python per byte:

- a first look for a small text (a document, a state): fewer opening brackets and digits, all
  told, than either bound, and nothing more is done;
- else one ``translate`` maps the text (digits to ``0``; brackets, quotes, backslashes kept;
  the rest a space). Depth: escapes removed, then everything but brackets and quotes, then the
  strings, and the running sum of the brackets left. Digits: one ``find`` of a run of zeros
  longer than the bound; only a text holding such a run (a long digit string in a key, or a
  hostile number) is parsed with number hooks that measure each number itself.

The scan costs about a sixth to a quarter of the parse on an index (more on an index of small
objects), a document a line at a time about the same as ``json.loads``. orjson and msgspec were
measured too: up to twice as fast to parse, but orjson reads a 30-digit integer as a float, both
refuse NaN and 1e999, msgspec meets 1,000 levels with a RecursionError and orjson takes 1,024
(deeper than stoker's own code walks safely): they would change what parses, still need the depth
scan, and be a new dependency.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np

from ..errors import JsonError
from ._files import read_regular

__all__ = [
    "MAX_DIGITS",
    "MAX_DOCUMENT_BYTES",
    "MAX_INDEX_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MANIFEST_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_STATE_BYTES",
    "parse_json",
    "read_json",
]

MAX_JSON_DEPTH = 64
"""How deep outside JSON may nest: what stoker and the peers write nests under 20 levels, and
code that walks a parsed document (comparisons, ``repr``, a tree spec's leaves) stays far from the
interpreter's recursion limit."""

MAX_DIGITS = 100
"""The most digits a number may have: a 64-bit integer has 20, a float's shortest form 17 and
an exponent; Python's own limit (4,300) is a ``ValueError`` without a name, and converting a number
of that size costs milliseconds."""

# Sizes by purpose: what any real file of the kind fits with room to spare, and what parsing
# (about ten times the text in Python objects) can afford.
MAX_INDEX_BYTES = 256 << 20
"""A dataset's index (MDS's or LitData's ``index.json``, a tar shard's index of JSON form):
about a million shards' entries."""

MAX_MANIFEST_BYTES = 1 << 30
"""A dataset's manifest (``dataset.json``, which may list every sample, or carry every shard's
index): some ten million samples."""

MAX_STATE_BYTES = 64 << 20
"""A saved state (a Loader's or a TokenLoader's, a checkpoint's part): what is in flight, never
what was delivered, so kilobytes in practice."""

MAX_METADATA_BYTES = 64 << 20
"""Metadata beside data: ``state.json`` and ``dataset_info.json`` of a ``save_to_disk`` folder, a
key list's or a ledger's header, a run file, a split, a cached listing's header."""

MAX_DOCUMENT_BYTES = 64 << 20
"""One record read as JSON: a document, a sample's JSON member, a line of a record file."""

# Where a text that is not UTF-8 may begin: a byte-order mark (or a zero byte in the first four).
_BOM_STARTS = (b"\xef", b"\xfe", b"\xff")
# Deleted by `bytes.translate` for the first look: every byte but the opening brackets and digits.
_NOT_OPENING_OR_DIGIT = bytes(sorted(set(range(256)) - set(b"[{0123456789")))
# The scan's map, one byte for each: a digit to "0" (a run of digits is a run of zeros), a
# bracket, a quote or a backslash kept, any other byte a space.
_SCAN = bytes(0x30 if 0x30 <= value <= 0x39 else value if value in b'[]{}"\\' else 0x20 for value in range(256))
_SMALL = 1 << 16  # texts up to this size take the first look (a document); larger go to the scan
_NOT_DIGITS = re.compile(r"[^0-9]")
_CHUNK = 1 << 24  # brackets summed at once (bounded memory on a large index)
_DECODER = json.JSONDecoder()  # what json.loads uses without hooks; stateless, shared by threads


def parse_json(
    data: bytes | bytearray | memoryview | str,
    source: str,
    *,
    max_bytes: int,
    max_depth: int = MAX_JSON_DEPTH,
    max_digits: int = MAX_DIGITS,
) -> Any:
    """``data`` parsed as JSON (as ``json.loads`` parses it), or refused by name.

    Args:
        data: The JSON text (UTF-8, -16 or -32 bytes, or a string).
        source: Where it came from (a path, a URL, ``"<file> line 7"``), for messages.
        max_bytes: The most bytes it may have, chosen for its purpose (``MAX_INDEX_BYTES``...).
        max_depth: How deep arrays and objects may nest.
        max_digits: The most digits one number may have.

    Raises:
        JsonError: Larger than ``max_bytes``, nested deeper than ``max_depth``, a number longer
            than ``max_digits``, not text or not JSON; the message names ``source`` and the bound.
    """
    if isinstance(data, str):
        text, raw = data, data.encode("utf-8", "surrogatepass")
    elif not isinstance(data, (bytes, bytearray, memoryview)):
        raise _refused(source, f"not JSON text but {type(data).__name__}")
    else:
        raw, text = bytes(data) if not isinstance(data, bytes) else data, None
        if raw[:1] in _BOM_STARTS or b"\0" in raw[:4]:  # a byte-order mark, or UTF-16 or -32
            try:
                text = raw.decode(json.detect_encoding(raw), "surrogatepass")
            except UnicodeDecodeError as error:
                raise _refused(source, f"not JSON text ({error.reason} at byte {error.start})") from None
            raw = text.encode("utf-8", "surrogatepass")  # scanned as UTF-8: bytes past ASCII are never a bracket
    if len(raw) > max_bytes:
        raise _refused(source, f"{len(raw):,} bytes of JSON, over the {max_bytes:,} stoker reads here")
    hooks: dict[str, Any] = {}
    # A small text (a document, a state) with fewer opening brackets and digits, all told, than
    # either bound can neither nest deeper nor hold a longer number: one pass answers.
    if len(raw) > _SMALL or len(raw.translate(None, _NOT_OPENING_OR_DIGIT)) > min(max_depth, max_digits):
        scanned = raw.translate(_SCAN)  # digits to "0", brackets, quotes and backslashes kept, the rest " "
        depth = _depth(scanned, max_depth)
        if depth > max_depth:
            raise _refused(source, f"JSON nested too deep ({depth:,} levels, past the {max_depth} stoker reads)")
        if b"0" * (max_digits + 1) in scanned:
            # A run of digits that long, in a number or in a string: the parser measures each number.
            hooks = {"parse_int": _bounded_number(int, max_digits, source), "parse_float": _bounded_number(float, max_digits, source)}
    try:
        if text is None:
            text = raw.decode("utf-8", "surrogatepass")  # as json.loads decodes bytes
        return json.JSONDecoder(**hooks).decode(text) if hooks else _DECODER.decode(text)
    except JsonError:
        raise
    except RecursionError:  # not reached under the depth bound; named all the same
        raise _refused(source, f"JSON nested too deep to read (past the {max_depth} levels stoker reads)") from None
    except UnicodeDecodeError as error:
        raise _refused(source, f"not JSON text ({error.reason} at byte {error.start})") from None
    except ValueError as error:  # JSONDecodeError, and a float hook's own ValueError
        raise _refused(source, f"not valid JSON ({error})") from None


def read_json(
    path: str | os.PathLike[str],
    *,
    what: str,
    max_bytes: int,
    max_depth: int = MAX_JSON_DEPTH,
    max_digits: int = MAX_DIGITS,
    source: str | None = None,
) -> Any:
    """The regular file at ``path`` parsed as JSON (`parse_json`), refused by its size before a
    byte of it is read.

    Args:
        path: The file.
        what: What it is, for messages (``"an MDS index"``).
        max_bytes, max_depth, max_digits: As `parse_json`.
        source: How messages name it (default: the path).

    Raises:
        FileNotFoundError: Nothing at ``path``.
        StorageError: Not a regular file (a FIFO, a folder), larger than ``max_bytes``; or (its
            subclass `JsonError`) not JSON, or past a bound; named.
    """
    data = read_regular(path, limit=max_bytes, what=what)
    return parse_json(data, str(path) if source is None else source, max_bytes=max_bytes, max_depth=max_depth, max_digits=max_digits)


def _depth(scanned: bytes, bound: int) -> int:
    """How deep the arrays and objects of a text nest (`_SCAN`'s map of it: one byte for each
    of its bytes, brackets, quotes and backslashes kept), counting the brackets outside strings;
    0 when fewer brackets open than ``bound``. For a text that is not JSON the answer is some
    number: the parser then says what is wrong, and nothing deeper than the answer reaches it."""
    first = scanned.find(b"\\")
    if first >= 0:
        # Escapes go first, between the first backslash and the last (a few strings, usually):
        # a pair of backslashes, then an escaped quote; no other escape holds a quote or a
        # bracket (the byte after a backslash is kept in the map, as a space if it is neither).
        last = scanned.rfind(b"\\") + 2
        scanned = scanned[:first] + scanned[first:last].replace(b"\\\\", b"").replace(b'\\"', b"") + scanned[last:]
    structure = scanned.translate(None, b" 0\\")
    if structure.count(b"[") + structure.count(b"{") <= bound:
        return 0
    # Two quotes side by side are an empty string, or a string's end and the next one's start
    # with nothing between them: removing them moves nothing in or out of a string. What stays
    # in quotes then is the few strings that hold brackets.
    structure = structure.replace(b'""', b"")
    if b'"' in structure:
        structure = b"".join(structure.split(b'"')[0::2])
    deepest, level = 0, 0
    for start in range(0, len(structure), _CHUNK):
        brackets = np.frombuffer(structure, dtype=np.uint8, count=min(_CHUNK, len(structure) - start), offset=start)
        # "[" and "{" have bit 1 set, "]" and "}" clear: +1 and -1.
        steps = ((brackets >> 1) & 1).astype(np.int8) * 2 - 1
        running = np.cumsum(steps, dtype=np.int64) + level
        deepest = max(deepest, int(running.max()))
        level = int(running[-1])
    return deepest


def _refused(source: str, reason: str) -> JsonError:
    return JsonError(f"{source}: {reason}", source=source, reason=reason)


def _bounded_number(kind: type, bound: int, source: str) -> Any:
    """A number hook for the parser: ``kind(text)``, refused past ``bound`` digits."""

    def parse(text: str) -> Any:
        digits = max(len(run) for run in _NOT_DIGITS.split(text))
        if digits > bound:
            raise _refused(source, f"a number of {digits:,} digits in JSON (past the {bound} stoker reads)")
        return kind(text)

    return parse
