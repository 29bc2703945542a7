"""The node cache's stores, made by a thread of their own: many entries to one store (one turn of
the node's write lock), without the GIL, while the event loops go on reading.

A cold epoch through the node cache stores every sample it reads. Stored on the event loop's
thread, a loop turn's responses at a time, a rank's stores came one or two to a transaction
(responses trickle in): measured in the hosts harness (2 hosts x 2 ranks, 50 ms to the store),
55-89 us of the loop thread's CPU per sample in LMDB's commits and 90-210 us of wall time with
the GIL held, which every other thread of the rank (the pipeline's Python, the training loop)
waited out; the cache's cold epoch ran at 0.85-0.91 of the samples/s of no cache. Here a request
hands its entry over and goes on: the writer takes whatever is waiting, stores it in one
transaction with the GIL let go of, and only then lets go of the entries' claims, so nothing on
the node fetches an entry while it waits. Until then this process reads it from `pending`.

Responses trickle in (a rank at 200 samples/s hands one over every 5 ms), and a transaction
for each entry cost the writer 110 us of its CPU a 20 KB sample in the hosts harness (205-240 us
beside a running CI): LMDB writes 60 KB of pages for an entry stored alone (26-33 KB an entry
four to sixteen to a transaction), mostly the kernel copying them into new pages of the file,
plus a wake-up and a turn of the GIL for each. So once an entry waits, the writer gathers others
for up to 20 ms (or 2 MB of them) before it stores them all in one transaction: 40-55 us a
sample there since (docs/benchmarks.md, "Several hosts"). (Those were LMDB's figures; the
entries' own files since write each entry once, appended: 20-27 us of the writer's CPU a 20 KB
miss in `benchmarks/storage/node_cache_path.py`, against 69-110 us with LMDB the same hour.)
`flush` and `close` do not wait for that. Another rank wanting one of them waits on its claim
that much longer at most; this process reads it from `pending` meanwhile.

Entries waiting are bounded (``max_bytes``): a request that hands one over past the bound waits
for the writer to catch up (a disk slower than the store), so memory stays bounded and no entry
is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Sequence

from ._cache_entries import CacheEntries
from ._loop_turns import complete

__all__ = ["CacheWriter"]

# The writer's thread ends after this long with nothing to store (a cache no longer read, or
# dropped unclosed, keeps no thread); the next entry starts another.
_IDLE_SECONDS = 1.0
# Once an entry waits, the writer gathers others for this long (or until `_GATHER_BYTES` wait)
# before it stores them, unless a `flush` or `close` is waiting: see the module's notes.
_GATHER_SECONDS = 0.02
_GATHER_BYTES = 2 << 20
# An entry waiting: its name, bytes and claim (None: none to let go of); bytes None: only a
# claim to let go of once what waits before it is stored (see `release_after`).
_Entry = tuple[str, bytes | memoryview | None, str | None]


class CacheWriter:
    """Stores entries handed over from any thread, from a thread of its own.

    Args:
        entries: Where they are stored.
        release: Lets go of ``[(name, claim), ...]`` once those entries are stored (or failed).
        failed: Told of an error storing (a full disk): the entries are not kept, their claims
            let go of all the same.
        max_bytes: Bytes of entries waiting at most before a request that hands one over waits.
    """

    def __init__(
        self,
        entries: CacheEntries,
        release: Callable[[list[tuple[str, str]]], None],
        failed: Callable[[Exception], None],
        max_bytes: int = 64 << 20,
    ) -> None:
        self._entries = entries
        self._release = release
        self._failed = failed
        self.max_bytes = max_bytes
        self._condition = threading.Condition()
        self._queue: list[_Entry] = []
        self._pending: dict[str, bytes | memoryview] = {}  # name -> bytes, until stored
        self._pending_bytes = 0
        self._queued_bytes = 0  # of the entries in `_queue`, not yet taken by the writer
        self._hurried = 0  # calls waiting for everything handed over to be stored
        self._storing = False
        self._room: list[asyncio.Future[None]] = []  # requests waiting for the pending bytes to drop
        self._thread: threading.Thread | None = None
        self._process = os.getpid()
        self._closed = False

    def pending(self, name: str) -> bytes | memoryview | None:
        """The bytes of ``name`` if handed over and not stored yet."""
        return self._pending.get(name)

    def add(self, name: str, data: bytes | memoryview, claim: str | None, *, wait: bool = True) -> asyncio.Future[None] | None:
        """Hand ``name`` over to be stored (``claim`` let go of once it is). Returns None, or,
        past the bound and with ``wait``, a future of the calling event loop to await before
        handing over more. After `close`, nothing is stored: ``claim`` is let go of at once.
        """
        with self._condition:
            self._forked()
            closed = self._closed
            if not closed:
                self._queue.append((name, data, claim))
                self._pending[name] = data
                self._pending_bytes += len(data)
                self._queued_bytes += len(data)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="stoker-cache-writer", daemon=True)
                    self._thread.start()
                # The writer is woken for the first entry and once enough are gathered, not for
                # each (a wake-up is a thread switch and a turn of the GIL).
                if len(self._queue) == 1 or self._queued_bytes - len(data) < _GATHER_BYTES <= self._queued_bytes:
                    self._condition.notify_all()
                if not wait or self._pending_bytes <= self.max_bytes:
                    return None
                room: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._room.append(room)
                return room
        self._failed(RuntimeError("the cache is closed in this process"))
        if claim is not None:
            self._release([(name, claim)])
        return None

    def release_after(self, name: str, claim: str) -> bool:
        """Let go of ``claim`` only once ``name``'s entry, waiting here, is stored; False (nothing
        done) when none waits. A hedged copy stores its entry without the claim, which its
        original lets go of when cancelled: let go of at once, another rank would find neither
        the claim nor the entry on disk, and fetch it again."""
        with self._condition:
            self._forked()
            if self._closed or name not in self._pending:
                return False
            self._queue.append((name, None, claim))
            if len(self._queue) == 1:
                self._condition.notify_all()
            return True

    def flush(self) -> None:
        """Return once every entry handed over so far is stored (from any thread but the
        writer's)."""
        with self._condition:
            self._forked()
            self._hurried += 1  # the writer stores what waits without gathering more
            self._condition.notify_all()
            try:
                self._condition.wait_for(lambda: not self._queue and not self._storing)
            finally:
                self._hurried -= 1

    def close(self) -> None:
        """Store what waits, then stop the thread (idempotent)."""
        with self._condition:
            self._forked()
            self._closed = True
            self._condition.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _forked(self) -> None:
        """In a forked child, start over: the parent stores its own entries, and the child
        holds none of their claims (called holding the condition)."""
        if self._process == os.getpid():
            return
        self._process = os.getpid()
        self._queue, self._pending, self._pending_bytes, self._storing, self._room = [], {}, 0, False, []
        self._queued_bytes, self._hurried = 0, 0
        self._thread, self._closed = None, False

    def _run(self) -> None:
        while True:
            with self._condition:
                self._condition.wait_for(lambda: self._queue or self._closed, timeout=_IDLE_SECONDS)
                if not self._queue:  # closed, or idle: `add` starts another when needed
                    self._thread = None
                    return
                self._condition.wait_for(self._gathered, timeout=_GATHER_SECONDS)
                batch, self._queue, self._queued_bytes, self._storing = self._queue, [], 0, True
            self._store(batch)
            with self._condition:
                for name, data, _ in batch:
                    if data is None:
                        continue
                    if self._pending.get(name) is data:  # not handed over again meanwhile
                        del self._pending[name]
                    self._pending_bytes -= len(data)
                self._storing = False
                waiting = self._room if self._pending_bytes <= self.max_bytes else []
                if waiting:
                    self._room = []
                self._condition.notify_all()
            for room in waiting:
                complete(room, None)

    def _gathered(self) -> bool:
        """Whether to store what waits now, before `_GATHER_SECONDS` are up (called holding the
        condition)."""
        return self._closed or self._hurried > 0 or self._queued_bytes >= _GATHER_BYTES

    def _store(self, batch: Sequence[_Entry]) -> None:
        entries = [(name, data) for name, data, _ in batch if data is not None]
        try:
            if entries:
                self._entries.put_many(entries, detach=True)
        except Exception as error:  # a full disk must not fail a sample that was read fine
            self._failed(error)
        with contextlib.suppress(Exception):  # said by `release` itself
            self._release([(name, claim) for name, _, claim in batch if claim is not None])
