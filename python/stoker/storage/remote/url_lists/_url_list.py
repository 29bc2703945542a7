"""HTTP(S) datasets named by URL: one file, a folder, or a list of files in WebDataset's brace
form (``https://host/data/shard-{000000..000999}.tar``, lists joined by ``::``), the way many
public datasets are published. Read into one `UrlList`: the server, the folder the files share,
and each file's name under it (`UrlNames`), so every sample is named by its real URL.

A brace pattern is never expanded whole: its names are computed when asked for
(`BracePattern`), so a list of 10^7 files holds no string per file. A pattern whose fixed text
names the server and folder, and whose braces add no query, escape or folder (the usual
``https://host/data/shard-{000000..999999}.tar``), is checked once for all its URLs, and its
names are its URLs from one position on; any other is checked URL by URL, in one pass that keeps
nothing per URL. Names are checked to be distinct without listing them where the pattern's form
proves it (ranges and text), else by a pass that keeps one 8-byte hash per name.
"""

from __future__ import annotations

import bisect
import operator
import posixpath
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any
from urllib.parse import ParseResult, unquote, urlparse

import numpy as np

from ...._bounded import shown, shown_url
from ....errors import ConfigurationError, StokerError
from ._brace import BracePattern

__all__ = ["HTTP_SCHEMES", "MAX_URLS", "UrlList", "UrlNames", "expand_urls", "parse_url_list"]

HTTP_SCHEMES = ("http", "https")

MAX_URLS = 10_000_000
"""The most files one list may name: ``{0..99999999999}`` is a typo, not a dataset."""

_CHANGES_NAME = frozenset("?#;%\\\t\r\n")
"""Characters that, after a pattern's fixed text, could start a query or change a URL's name
(unquoting, escapes, the tabs and newlines ``urlparse`` removes)."""

_HASHED_AT_ONCE = 1 << 16


class _Parts(Sequence[str]):
    """A sequence of strings made of parts (each a sized, indexable, iterable of strings).
    Immutable once made: threads read it freely (a storage's keys are read by its I/O threads)."""

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts
        self._starts = [0]
        for part in parts:
            self._starts.append(self._starts[-1] + len(part))

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        index = operator.index(index)
        size = self._starts[-1]
        if not -size <= index < size:
            raise IndexError(f"no file {index} of {size}")
        if index < 0:
            index += size
        if len(self.parts) == 1:
            return self.parts[0][index]
        number = bisect.bisect_right(self._starts, index) - 1
        return self.parts[number][index - self._starts[number]]

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self.parts)

    def __repr__(self) -> str:
        shown = ", ".join(repr(text) for text in self[:3])
        return f"{type(self).__name__}([{shown}{', ...' if len(self) > 3 else ''}], {len(self):,} in all)"

    def __eq__(self, other: object) -> bool:  # as the list of the same strings
        return isinstance(other, Sequence) and not isinstance(other, str) and len(other) == len(self) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


class Urls(_Parts):
    """Every URL a list names, in order, computed when asked for (see the module notes)."""


class UrlNames(_Parts):
    """Each file's name under the list's folder, in the list's order, computed when asked for."""


class _CutNames:
    """The names of a pattern's URLs that share their server and folder: each URL from ``cut`` on
    (made from the expansion after the pattern's fixed text: one concatenation, or a slice)."""

    def __init__(self, pattern: BracePattern, cut: int) -> None:
        self.pattern, self.cut = pattern, cut
        self.urls = pattern
        head = pattern.literal_prefix()
        self._lead, self._skip = head[cut:], max(cut - len(head), 0)

    def __len__(self) -> int:
        return len(self.pattern)

    def __getitem__(self, index: int) -> str:
        return self._lead + self.pattern.rest_at(index)[self._skip :]

    def __iter__(self) -> Iterator[str]:
        if self._skip:
            return map(operator.itemgetter(slice(self._skip, None)), self.pattern.rests())
        return map(self._lead.__add__, self.pattern.rests()) if self._lead else self.pattern.rests()


class _ParsedNames:
    """The names of any URLs: each parsed, unquoted, and cut ``start`` characters into its path."""

    def __init__(self, urls: Sequence[str], start: int) -> None:
        self.urls, self.start = urls, start

    def __len__(self) -> int:
        return len(self.urls)

    def __getitem__(self, index: int) -> str:
        return _path(urlparse(self.urls[index]))[self.start :]

    def __iter__(self) -> Iterator[str]:
        start = self.start
        return (_path(urlparse(url))[start:] for url in self.urls)


def _path(parsed: ParseResult) -> str:
    return unquote(parsed.path).lstrip("/")


def expand_urls(urls: str | Sequence[str]) -> Urls:
    """Every URL that ``urls`` names: brace patterns expanded as WebDataset (braceexpand) does
    (``{000..099}`` keeps the zeros, ``{a,b}`` alternatives, nested braces), ``::`` joins lists,
    and a sequence of URLs may hold patterns too. Lazy: a pattern's URLs are computed when asked
    for, so the result of ``https://host/{0000000..9999999}.jpg`` holds no string per URL.

    Raises:
        ConfigurationError: More than `MAX_URLS` files, none, or a pattern that is not one
            (unbalanced braces, a range bound of more than 100 digits, braces nested too deep).
    """
    pieces = urls.split("::") if isinstance(urls, str) else [str(url) for url in urls]
    parts: list[Sequence[str]] = []
    plain: list[str] = []
    total = 0
    for piece in pieces:
        piece = piece.strip()
        if not any(character in piece for character in "{}\\"):
            if piece:
                plain.append(piece)
                total += 1
            if total > MAX_URLS:
                raise ConfigurationError(f"{str(urls)[:200]!r} names more than {MAX_URLS:,} files")
            continue
        if plain:
            parts.append(plain)
            plain = []
        pattern = BracePattern(piece)
        if pattern.size > MAX_URLS - total:
            raise ConfigurationError(f"{piece[:200]!r} names more than {MAX_URLS:,} files; is a brace range mistyped?")
        # An empty expansion is no URL (the list skips it): such a pattern is listed, few as its URLs are.
        parts.append(pattern if pattern.shortest() > 0 else [url for url in pattern if url])
        total += len(parts[-1])
    if plain:
        parts.append(plain)
    if total == 0:
        raise ConfigurationError(f"{str(urls)[:200]!r}: names no URL")
    return Urls([part for part in parts if len(part)])


@dataclass(frozen=True)
class UrlList:
    """Files on one HTTP(S) server.

    Attributes:
        scheme: ``"https"`` or ``"http"``.
        server: ``host`` or ``host:port``.
        prefix: The folder the files share, without slashes at either end.
        names: Each file under ``prefix``, in the list's order (`UrlNames`, computed when asked
            for); None for a folder URL (its ``dataset.json`` or ``index.json`` says what is there).
    """

    scheme: str
    server: str
    prefix: str
    names: UrlNames | None

    @property
    def base(self) -> str:
        """``scheme://server/``: what the client is opened on."""
        return f"{self.scheme}://{self.server}/"


class _Checks:
    """The checks every URL of a list passes, against the list's first URL."""

    def __init__(self, first_url: str) -> None:
        self.first_url = first_url
        first = urlparse(first_url)
        self.server = (first.scheme.lower(), first.netloc.lower())

    def check(self, url: str, part: ParseResult) -> None:
        """Raises ConfigurationError: not http(s) with a host, another server, credentials, or a query."""
        if part.scheme.lower() not in HTTP_SCHEMES or not part.netloc:
            raise ConfigurationError(f"not an http:// or https:// URL with a host: {shown_url(url)!r}")
        if (part.scheme.lower(), part.netloc.lower()) != self.server:
            raise ConfigurationError(
                f"one dataset's URLs must share one server: {shown_url(self.first_url)!r} and {shown_url(url)!r} do not"
            )
        if "@" in part.netloc:
            raise ConfigurationError(f"{shown_url(url)}: credentials in a URL end up in logs; pass headers= instead")
        if part.query or part.fragment:
            raise ConfigurationError(
                f"{shown_url(url)}: a URL with a query (a signed URL) is not supported: "
                "its query would be logged with every sample's name; pass secrets as headers="
            )
        try:
            part.port  # noqa: B018 (urllib checks the port when asked for it)
        except ValueError as error:  # past 65535, or not a number
            raise ConfigurationError(f"{shown(url, 200)}: not a URL stoker can request ({error})") from error

    def folder(self, urls: Iterable[str]) -> str:
        """Check each of ``urls``; the folder they share (a path from ``/``). One pass, nothing kept."""

        def paths() -> Iterator[str]:
            for url in urls:
                parsed = urlparse(url)
                self.check(url, parsed)
                yield unquote(parsed.path)

        return _common_folder(paths())


def _path_start(pattern: BracePattern) -> int | None:
    """Where each URL's path starts, for a pattern whose fixed text names the server and the
    start of the path plainly, and whose braces add no query, escape or quoting (so every URL has
    that server, no query, and its name is a slice of it at one place); None for any other
    (checked URL by URL)."""
    head = pattern.literal_prefix()
    parsed = urlparse(head)
    start = len(parsed.scheme) + 3 + len(parsed.netloc)
    if not (parsed.scheme and parsed.netloc and parsed.path.startswith("/")) or head[start:] != parsed.path or "%" in head:
        return None  # the head does not name server and path plainly (or urlparse changed it)
    if head[: start - len(parsed.netloc)].lower() != f"{parsed.scheme}://" or pattern.characters() & _CHANGES_NAME:
        return None
    if "/" in pattern.characters() and not parsed.path.strip("/"):
        return None  # the braces' own slashes may start a path: its name is cut after them
    return start


def _pattern_folder(pattern: BracePattern, path_start: int) -> str:
    """The folder a pattern's URLs share (with `_path_start`), from the start they all share."""
    shared = pattern.common_start()[path_start:]
    return posixpath.dirname(shared[: shared.rfind("/") + 1]) or "/"


def parse_url_list(urls: str | Sequence[str]) -> UrlList:
    """Read ``urls`` (see `expand_urls`): a URL that ends in ``/``, or whose last part has no
    file extension, is a folder; anything else a list of files.

    Raises:
        ConfigurationError: Not http(s) URLs; more than one server; a query, fragment or
            credentials in a URL (a signed or secret URL would end up in logs and ledgers: pass
            secrets as ``headers=``); a URL that names no file, or a file named twice; a URL
            urllib cannot read (a port past 65535, an IPv6 address without its closing bracket).
    """
    try:
        return _parse_url_list(urls)
    except StokerError:
        raise
    except ValueError as error:  # urllib's own, on a URL it cannot split
        text = str(urls)[:200].rpartition("@")[2]  # what may hold credentials left out
        raise ConfigurationError(f"{shown(text, 200)!r}: not a URL stoker can request ({error})") from error


def _parse_url_list(urls: str | Sequence[str]) -> UrlList:
    """`parse_url_list`, raising urllib's ValueError as it comes."""
    expanded = expand_urls(urls)
    checks = _Checks(expanded[0])
    first = urlparse(expanded[0])
    if len(expanded) == 1:
        checks.check(expanded[0], first)
        path = unquote(first.path)
        if path.endswith("/") or "." not in posixpath.basename(path):
            return UrlList(first.scheme.lower(), first.netloc, path.strip("/"), None)
    starts: list[int | None] = []
    folders = []
    for part in expanded.parts:
        path_start = _path_start(part) if isinstance(part, BracePattern) else None
        if path_start is None:
            folders.append(checks.folder(part))
        else:
            checks.check(part[0], urlparse(part[0]))  # the fixed text decides for every URL of the part
            folders.append(_pattern_folder(part, path_start))
        starts.append(path_start)
    folder = posixpath.commonpath(folders).strip("/")
    start = len(folder) + 1 if folder else 0
    parts: list[_CutNames | _ParsedNames] = []
    for part, path_start in zip(expanded.parts, starts):
        if path_start is None:
            parts.append(_ParsedNames(part, start))
        else:
            head = part.literal_prefix()[path_start:]
            parts.append(_CutNames(part, path_start + len(head) - len(head.lstrip("/")) + start))
    for part in parts:
        if not _all_files(part):
            for url, name in zip(part.urls, part):
                if not name or name.endswith("/"):
                    raise ConfigurationError(f"{url!r}: a list's URLs must each name a file")
    names = UrlNames(parts)
    _check_distinct(names, f"{first.scheme}://{first.netloc}/{folder + '/' if folder else ''}")
    return UrlList(first.scheme.lower(), first.netloc, folder, names)


def _all_files(part: _CutNames | _ParsedNames) -> bool:
    """Whether each name of a part is known to name a file without listing them: a pattern's
    URLs all longer than the cut, all ending in fixed text that does not end in a slash."""
    if not isinstance(part, _CutNames):
        return False
    suffix = part.pattern.literal_suffix()
    return bool(suffix) and not suffix.endswith("/") and part.pattern.shortest() > part.cut


def _common_folder(paths: Iterable[str]) -> str:
    """The folder ``paths`` share (each from ``/``), in one pass that keeps nothing per path."""
    common: str | None = None
    for path in paths:
        folder = posixpath.dirname(path) or "/"
        if common is None:
            common = folder
        elif folder != common and not folder.startswith(common.rstrip("/") + "/"):
            common = posixpath.commonpath([common, folder])
    return common or "/"


def _check_distinct(names: UrlNames, base: str) -> None:
    """Raises ConfigurationError naming the first name the list holds twice.

    One pattern whose form proves its names distinct is not listed; anything else is hashed a
    name at a time (8 bytes each), and hashes that meet are compared as names."""
    if len(names.parts) == 1 and isinstance(names.parts[0], _CutNames) and names.parts[0].pattern.distinct():
        return
    hashes = np.empty(len(names), dtype=np.int64)
    done = 0
    chunk: list[str] = []
    for name in names:
        chunk.append(name)
        if len(chunk) == _HASHED_AT_ONCE:
            hashes[done : done + len(chunk)] = np.fromiter(map(hash, chunk), np.int64, len(chunk))
            done += len(chunk)
            chunk = []
    hashes[done:] = np.fromiter(map(hash, chunk), np.int64, len(chunk))
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    meets = np.flatnonzero(ordered[1:] == ordered[:-1])
    if not len(meets):
        return
    twice: tuple[int, str] | None = None  # (first position, name) of the earliest name held twice
    for value in np.unique(ordered[meets]).tolist():
        positions = sorted(order[ordered == value].tolist())
        seen: dict[str, int] = {}
        for position in positions:
            name = names[position]
            if name in seen and (twice is None or seen[name] < twice[0]):
                twice = (seen[name], name)
            seen.setdefault(name, position)
    if twice is not None:
        raise ConfigurationError(f"{base}{twice[1]}: named twice in the list (its samples would be read twice an epoch)")
