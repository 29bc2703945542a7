"""HTTP(S) datasets named by URL: one file, a folder, or a list of files in WebDataset's brace
form (``https://host/data/shard-{000000..000999}.tar``, lists joined by ``::``), the way many
public datasets are published. Read into one `UrlList`: the server, the folder the files share,
and each file's name under it, so every sample is named by its real URL."""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from ...errors import ConfigurationError

__all__ = ["HTTP_SCHEMES", "MAX_URLS", "UrlList", "expand_urls", "parse_url_list"]

HTTP_SCHEMES = ("http", "https")

MAX_URLS = 10_000_000
"""The most files one list may name: a brace range is a generator, and ``{0..99999999999}`` a
typo that would otherwise fill memory."""


@dataclass(frozen=True)
class UrlList:
    """Files on one HTTP(S) server.

    Attributes:
        scheme: ``"https"`` or ``"http"``.
        server: ``host`` or ``host:port``.
        prefix: The folder the files share, without slashes at either end.
        names: Each file under ``prefix``, in the list's order; None for a folder URL (its
            ``dataset.json`` or ``index.json`` says what is there).
    """

    scheme: str
    server: str
    prefix: str
    names: list[str] | None

    @property
    def base(self) -> str:
        """``scheme://server/``: what the client is opened on."""
        return f"{self.scheme}://{self.server}/"


def expand_urls(urls: str | Sequence[str]) -> list[str]:
    """Every URL that ``urls`` names: brace patterns expanded as WebDataset (and the shell) do
    (``{000..099}`` keeps the zeros, ``{a,b}`` alternatives, nested braces), ``::`` joins lists.

    Raises:
        ConfigurationError: More than `MAX_URLS` files, or none.
        ImportError: braceexpand is not installed (the message says how to get it).
    """
    try:
        from braceexpand import braceexpand
    except ImportError as error:
        raise ImportError("https:// URL lists need braceexpand: pip install 'stoker[http]'") from error
    pieces = urls.split("::") if isinstance(urls, str) else [str(url) for url in urls]
    expanded: list[str] = []
    for piece in pieces:
        # braceexpand builds every range whole before the first URL (itertools.product takes
        # tuples): a range is sized here first, or {0..99999999999} would fill memory.
        if _most_urls(piece) > MAX_URLS - len(expanded):
            raise ConfigurationError(f"{piece!r} names more than {MAX_URLS:,} files; is a brace range mistyped?")
        expanded.extend(braceexpand(piece.strip()))
    urls_found = [url for url in expanded if url]
    if not urls_found:
        raise ConfigurationError(f"{urls!r}: names no URL")
    return urls_found


_GROUP = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$")


def _most_urls(pattern: str) -> int:
    """An upper bound on how many URLs ``pattern`` expands to, without expanding it: the product,
    over every brace group at every depth, of its parts (a range's length, else its alternatives)."""
    bound = 1
    while True:
        group = _GROUP.search(pattern)
        if group is None:
            return bound
        inside = group.group(1)
        numbers = _RANGE.match(inside)
        if numbers is not None:
            first, last, step = int(numbers.group(1)), int(numbers.group(2)), abs(int(numbers.group(3) or 1)) or 1
            bound *= abs(last - first) // step + 1
        else:
            alternatives = len(inside.split(","))
            bound *= max(alternatives, 52) if ".." in inside else alternatives  # 52: a letter range, a..Z
        if bound > MAX_URLS:
            return bound
        pattern = pattern[: group.start()] + "x" + pattern[group.end() :]


def parse_url_list(urls: str | Sequence[str]) -> UrlList:
    """Read ``urls`` (see `expand_urls`): a URL that ends in ``/``, or whose last part has no
    file extension, is a folder; anything else a list of files.

    Raises:
        ConfigurationError: Not http(s) URLs; more than one server; a query, fragment or
            credentials in a URL (a signed or secret URL would end up in logs and ledgers: pass
            secrets as ``headers=``).
    """
    expanded = expand_urls(urls)
    parsed = [urlparse(url) for url in expanded]
    first = parsed[0]
    for url, part in zip(expanded, parsed):
        if part.scheme.lower() not in HTTP_SCHEMES or not part.netloc:
            raise ConfigurationError(f"not an http:// or https:// URL with a host: {url!r}")
        if (part.scheme.lower(), part.netloc.lower()) != (first.scheme.lower(), first.netloc.lower()):
            raise ConfigurationError(f"one dataset's URLs must share one server: {expanded[0]!r} and {url!r} do not")
        if "@" in part.netloc:
            raise ConfigurationError(
                f"{part.scheme}://{part.hostname}{part.path}: credentials in a URL end up in logs; pass headers= instead"
            )
        if part.query or part.fragment:
            raise ConfigurationError(
                f"{part.scheme}://{part.netloc}{part.path}: a URL with a query (a signed URL) is not supported: "
                "its query would be logged with every sample's name; pass secrets as headers="
            )
    paths = [unquote(part.path) for part in parsed]
    if len(paths) == 1 and (paths[0].endswith("/") or "." not in posixpath.basename(paths[0])):
        return UrlList(first.scheme.lower(), first.netloc, paths[0].strip("/"), None)
    folder = posixpath.commonpath([posixpath.dirname(path) or "/" for path in paths]).strip("/")
    start = len(folder) + 1 if folder else 0
    names = [path.lstrip("/")[start:] for path in paths]
    for url, name in zip(expanded, names):
        if not name or name.endswith("/"):
            raise ConfigurationError(f"{url!r}: a list's URLs must each name a file")
    if len(set(names)) != len(names):
        twice = next(name for name, count in Counter(names).items() if count > 1)
        raise ConfigurationError(
            f"{first.scheme}://{first.netloc}/{folder}/{twice}: named twice in the list (its samples would be read twice an epoch)"
        )
    return UrlList(first.scheme.lower(), first.netloc, folder, names)
