"""Per-file index arrays read when first needed and held within a bound in bytes: what tar
shards and JSON Lines files share, so that a dataset of any size holds the indexes its reads
touch, up to what the user allows, and never one Python object per sample."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["HeldIndexes"]


class _Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


_Index = TypeVar("_Index", bound=_Sized)


class HeldIndexes(Generic[_Index]):
    """File number to its loaded index, least recently used let go past ``max_bytes`` (the last
    one loaded always stays, however large).

    Args:
        load: Reads file ``number``'s index (called under the lock: one load per file at once).
        max_bytes: Bytes of indexes held.
    """

    def __init__(self, load: Callable[[int], _Index], max_bytes: int) -> None:
        self._load = load
        self._max_bytes = max_bytes
        self._held: OrderedDict[int, _Index] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, number: int) -> _Index:
        """File ``number``'s index, read now if it is not held."""
        with self._lock:
            index = self._held.get(number)
            if index is not None:
                self._held.move_to_end(number)
                return index
            index = self._load(number)
            self._held[number] = index
            self._bytes += index.nbytes
            while self._bytes > self._max_bytes and len(self._held) > 1:
                _, dropped = self._held.popitem(last=False)
                self._bytes -= dropped.nbytes
            return index

    @property
    def held_bytes(self) -> int:
        """Bytes of indexes held now."""
        return self._bytes
