"""URL lists as datasets name them: one URL, several joined by ``::``, or WebDataset's brace form
(``https://host/data/shard-{000000..999999}.tar``), read into the server, the folder and each
file's name under it (`parse_url_list`), computed when asked for, never expanded whole
(`BracePattern`): a list of 10^7 files costs the memory of its pattern."""

from ._brace import MAX_BOUND_DIGITS, MAX_NESTING, BracePattern
from ._url_list import HTTP_SCHEMES, MAX_URLS, UrlList, UrlNames, Urls, expand_urls, parse_url_list

__all__ = [
    "HTTP_SCHEMES",
    "MAX_BOUND_DIGITS",
    "MAX_NESTING",
    "MAX_URLS",
    "BracePattern",
    "UrlList",
    "UrlNames",
    "Urls",
    "expand_urls",
    "parse_url_list",
]
