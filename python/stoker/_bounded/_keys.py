"""Key lists from outside: the keys a caller hands `Loader.exclude`, a side table's key column, a
ledger's or a key list file's keys. A key names a sample, and is text.

Each key is checked where the list is read: text is taken as it is, bytes as UTF-8, and anything
else is refused by name with its position. A null above all (None, a Parquet null, pandas NA): read
as a key it named no sample, so the sample meant was silently left in, or a null turned into the
text ``"None"`` matched nothing and the list meant something else than it said. An iterable is
consumed once and up to a bound, so an endless generator is refused, never followed.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ConfigurationError, StokerError

__all__ = ["key_list", "key_text"]


def key_text(value: object, position: int, what: str, error: type[StokerError] = ConfigurationError) -> str:
    """``value`` as a key: text as it is, bytes decoded as UTF-8.

    Args:
        value: One entry of a key list.
        position: Its position in the list (0 first), for the message.
        what: What the list is, for the message (``"exclude(keys=...)"``).
        error: The error to raise (a file's reader raises its own kind).

    Raises:
        error: A null, bytes that are not UTF-8, or anything but text and bytes; named with
            ``what`` and ``position``.
    """
    if isinstance(value, str):
        return str(value)  # a subclass (numpy's str_) as plain text
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise error(f"{what}: key {position} is not UTF-8 text ({bytes(value)[:40]!r})") from None
    if value is None or type(value).__name__ == "NAType" or (isinstance(value, float) and value != value):  # None, pandas NA, NaN
        raise error(f"{what}: key {position} is null (a key list holds each sample's key, as text)")
    raise error(f"{what}: key {position} is {type(value).__name__} {repr(value)[:40]}, not a key (text)")


def key_list(keys: object, what: str, most: int, error: type[StokerError] = ConfigurationError) -> list[str]:
    """The keys of ``keys`` (any iterable of text or UTF-8 bytes: a list, a tuple, a set, a
    generator, a NumPy array, a pandas Series), each checked by `key_text`, consumed once.

    Args:
        keys: The key list.
        what: What the list is, for messages.
        most: The most keys it may hold (an endless iterable is refused when it passes this).
        error: The error to raise.

    Raises:
        error: Not an iterable of keys (a string is one key, not a list), more than ``most``
            keys, or a key `key_text` refuses; each named.
    """
    if isinstance(keys, (str, bytes, bytearray)) or not isinstance(keys, Iterable):
        raise error(f"{what} takes an iterable of keys (text), e.g. a list; got {type(keys).__name__} {repr(keys)[:40]}")
    found: list[str] = []
    for position, value in enumerate(keys):
        if position == most:
            raise error(f"{what}: more than {most:,} keys (the most it takes here); an endless iterable?")
        found.append(key_text(value, position, what, error))
    return found
