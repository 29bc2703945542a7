"""Claims on the node's cache entries: "this request is fetching it", so the node's other ranks
wait for its entry instead of fetching the same object again.

A claim is an advisory lock on one byte of one of the cache's claims files, at an offset drawn
from the entry's name (62 bits of a hash: two names sharing one is never seen in practice, and
would only make one request wait for the other's fetch). Taking or giving one back is one system
call (about a microsecond) and takes no lock shared by the node. The claims are spread over
`CLAIM_FILES` files by that hash, because the kernel keeps a file's locks in one list and walks
all of it at every lock and unlock: with the 1,000 claims two ranks keep out (their requests in
flight and the next epoch's warm-up) in one file, a claim taken and given back cost 15 us of
CPU instead of 2 (2,000 claims: 29 us). The calls are native
(`stoker._native.lock_bytes`) and keep the GIL: `fcntl.lockf` lets go of it, and taking it back
on the event loop's thread waits out any busy Python thread's switch interval (5 ms); a loop
turn's claims are taken, and a stored batch's claims given back, in one call. They were rows of the cache's SQLite
index before: a write transaction per miss, for which the node's ranks queued on SQLite's one
write lock (its busy handler sleeps whole milliseconds), and a cold epoch through the node cache
ran at about half the speed of one without it.

The kernel lets go of a process's locks when it dies, so a rank killed mid-claim never leaves
the others waiting. Locks belong to a process, not to a request: requests of one process see each
other's claims in `_ProcessClaims.held`, and the process keeps one handle on each claims file
(closing any handle on it would drop every lock the process holds there). A forked child holds
none of its parent's locks, so it keeps claims of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import threading
from collections.abc import Sequence

from ... import _native
from ..._bounded import ManagedFolder

__all__ = ["NodeClaims"]

_OFFSETS = (1 << 62) - 1
# Claims files a cache's claims are spread over (see above); each process keeps each one open.
CLAIM_FILES = 32


class _ProcessClaims:
    """This process's handles on one cache's claims files, and the claims its requests hold."""

    def __init__(self, folder: ManagedFolder) -> None:
        self.handles: list[int] = []
        try:
            for number in range(CLAIM_FILES):  # through the folder's descriptor: a link there is refused, never followed
                self.handles.append(folder.open(f"claims-{number:02d}", os.O_RDWR | os.O_CREAT, 0o600))
        except OSError:
            for handle in self.handles:
                os.close(handle)
            raise
        self.held: dict[int, str] = {}  # offset -> the claim of this process's request holding it
        self.waiting: dict[int, list[asyncio.Future[None]]] = {}  # offset -> this process's requests waiting
        self.lock = threading.Lock()  # puts and releases run in worker threads
        self.users = 0  # `NodeClaims` of this process on the folder, not closed (under `_REGISTRY_LOCK`)

    def close(self) -> None:
        for handle in self.handles:
            os.close(handle)
        self.handles = []

    def handles_of(self, offsets: list[int]) -> list[int]:
        """The handle of the claims file each of ``offsets`` is in (drawn from its low bits)."""
        handles = self.handles
        return [handles[offset % CLAIM_FILES] for offset in offsets]


_PROCESS_CLAIMS: dict[tuple[int, int, int], _ProcessClaims] = {}  # (process, device, inode) -> its claims
_REGISTRY_LOCK = threading.Lock()
_NUMBERS = itertools.count()


class NodeClaims:
    """The claims of one cache folder, shared by every process that opens it.

    Args:
        folder: The cache's folder (open, checked); the claims files are ``claims-00`` to
            ``claims-31`` in it.

    Raises:
        OSError: The claims files cannot be opened (a read-only folder; `StorageError`: a link or
            another kind of file in a claims file's place).
    """

    def __init__(self, folder: ManagedFolder) -> None:
        self._folder = folder
        status = os.fstat(folder.fileno())
        self._identity = (status.st_dev, status.st_ino)
        self._process: int | None = None
        self._process_claims()

    def _process_claims(self) -> _ProcessClaims:
        """This process's claims on the file (a forked child gets its own: it holds no locks)."""
        key = (os.getpid(), *self._identity)
        claims = _PROCESS_CLAIMS.get(key)
        if claims is None or self._process != key[0]:
            with _REGISTRY_LOCK:
                claims = _PROCESS_CLAIMS.get(key)
                if claims is None:
                    claims = _PROCESS_CLAIMS[key] = _ProcessClaims(self._folder)
                if self._process != key[0]:  # this object's first use in this process
                    self._process = key[0]
                    claims.users += 1
        return claims

    def close(self) -> None:
        """Let go of this object's use of the process's claims files; the last user of the folder
        in this process closes them (its requests hold no claims by then: the cache is closed)."""
        key = (os.getpid(), *self._identity)
        with _REGISTRY_LOCK:
            claims = _PROCESS_CLAIMS.get(key)
            if claims is None or self._process != key[0]:
                return
            self._process = None
            claims.users -= 1
            if claims.users <= 0:
                del _PROCESS_CLAIMS[key]
                claims.close()

    def new_claim(self) -> str:
        """A claim no other request holds: ``"<process id>:<number>"``."""
        return f"{os.getpid()}:{next(_NUMBERS)}"

    def take_many(self, wanted: Sequence[tuple[str, str]]) -> list[bool]:
        """For each ``(name, claim)`` of ``wanted``, whether ``claim`` now holds ``name`` (False:
        another request on the node does), under one hold of the process's lock (a loop turn's
        misses claimed together).

        Raises:
            OSError: A lock cannot be taken for another reason than a holder (the claims taken
                before it are let go of).
        """
        claims = self._process_claims()
        offsets = [_offset(name) for name, _ in wanted]
        with claims.lock:
            # Held by a request of this process, or wanted twice in this call: not the later one
            # (a process taking its own lock again succeeds, so the kernel cannot tell).
            asked: dict[int, int] = {}
            for number, offset in enumerate(offsets):
                if offset not in claims.held and offset not in asked:
                    asked[offset] = number
            offsets = list(asked)
            locked = _native.lock_bytes(claims.handles_of(offsets), offsets)
            taken = [False] * len(wanted)
            for offset, held in zip(offsets, locked):
                if held:
                    taken[asked[offset]] = True
                    claims.held[offset] = wanted[asked[offset]][1]
        return taken

    def release_many(self, held: Sequence[tuple[str, str]]) -> None:
        """Let go of each ``(name, claim)`` of ``held`` (its entry is stored, or its fetch failed;
        nothing where ``claim`` does not hold ``name``), under one hold of the process's lock.

        Raises:
            OSError: A lock cannot be given back (the others still are).
        """
        claims = self._process_claims()
        waiting: list[asyncio.Future[None]] = []
        with claims.lock:
            offsets = []
            for name, claim in held:
                offset = _offset(name)
                if claims.held.get(offset) == claim:
                    del claims.held[offset]
                    waiting.extend(claims.waiting.pop(offset, []))
                    offsets.append(offset)
            try:
                _native.unlock_bytes(claims.handles_of(offsets), offsets)
            finally:
                self._wake_all(waiting)

    @staticmethod
    def _wake_all(waiting: list[asyncio.Future[None]]) -> None:
        for waiter in waiting:
            with contextlib.suppress(RuntimeError):  # its loop has closed: nobody waits any more
                waiter.get_loop().call_soon_threadsafe(_wake, waiter)

    def released(self, name: str) -> asyncio.Future[None] | None:
        """A future that completes when this process's request holding ``name`` lets it go;
        None when no request of this process holds it (another
        process's may: nothing tells this one when that ends, so the caller looks again later).
        Waiting in the process costs nothing, where looking again every few milliseconds cost
        each waiting request tens of microseconds of CPU a look."""
        offset = _offset(name)
        claims = self._process_claims()
        with claims.lock:
            if offset not in claims.held:
                return None
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            claims.waiting.setdefault(offset, []).append(waiter)
        return waiter


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _offset(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little") & _OFFSETS
