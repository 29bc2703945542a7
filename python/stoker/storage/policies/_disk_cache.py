"""A local cache of fetched samples with one byte limit, shared by every process on the node.

For remote storage read for many epochs: the second epoch reads from local disk (or from
``/dev/shm``) instead of the network. All ranks of a node open the same folder and see one cache:
a sample fetched by one rank is a hit for the others (the LMDBIO paper's "one reader per node",
applied to remote storage), under one size limit for all of them.

The entries are in a store of stoker's own (`CacheEntries`), every entry checked whole before it
is used, so a reader in any process never sees a partial entry, a rank killed mid-write never
breaks the cache, and a damaged file is a miss or a store made anew, never a crash. The folder is
opened once and checked (`stoker._bounded.private_folder`: a link is refused, a folder other
users can write is replaced by a private one in it), and every file in it is reached through its
descriptor, never through a link; nothing outside it is ever removed. Claims
(`NodeClaims`) keep two ranks from fetching one object at once: locks the kernel drops when a
rank dies. A loop turn's requests look together: one native read for all their names, one
call taking the misses' claims (see `get_or_claim`); their entries are stored by a writer thread,
many to a store without the GIL (`CacheWriter`). Eviction is oldest-stored first: an
epoch reads each sample once, so that is the order least recently used would give, without the
write that recording each read would cost on the hot path. A miss costs the event loop a read, a
claim and a hand-over on top of the fetch, about 16 us of CPU for a 20 KB sample here, and the
writer about 9 us more (docs/benchmarks.md, "Several hosts", for what a cold epoch costs).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..._bounded import private_folder, shown_logger
from ...errors import ConfigurationError
from ._cache_entries import CacheEntries
from ._cache_writer import CacheWriter
from ._hedged import is_hedged_copy
from ._loop_turns import LoopTurns
from ._node_claims import NodeClaims

__all__ = ["SampleCache"]

# How long a request waits for another's claim on an entry before fetching it itself (the
# holder's fetch may be stuck in an outage, retrying to its deadline).
CLAIM_SECONDS = 60.0
# A request waiting for another process's claim tries it again after ``poll``, then twice as
# long each time up to this: each try is CPU on the rank's event loop, and a claim can be held
# for a slow request's whole round trip (a rank's next-epoch warm-up waits for many).
_LONGEST_POLL = 0.04
# A look's answer where another request on the node holds the entry's claim.
_HELD: Any = object()
# A request's name and what its look will find.
_Lookup = tuple[str, "asyncio.Future[tuple[Any, str | None]]"]

_logger = shown_logger("stoker.storage")


class SampleCache:
    """Samples on local disk, about ``max_bytes`` of them at most (within one entry; the index's
    slots count too), shared by the processes that open the same folder.

    Args:
        folder: Where the cache lives (made, ``0o700``). A folder other users can write (such as
            ``/dev/shm``) is replaced by a private one in it, ``.stoker-<uid>``, with a warning.
        max_bytes: The byte limit; the oldest entries go first.

    Raises:
        ValueError: A limit that is not positive.
        StorageError: The folder cannot hold the cache, or is refused: a symbolic link, not a
            folder, another user's (and, inside ``STOKER_CACHE``, a folder on the way to it that
            is any of these or that other users can write).
    """

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ConfigurationError(f"max_bytes must be positive, got {max_bytes}")
        within = os.environ.get("STOKER_CACHE", Path.home() / ".cache" / "stoker")
        self._root = private_folder(folder, what="sample cache", within=within)
        self.folder = self._root.path  # the folder used: a private one in a shared folder
        self.max_bytes = max_bytes
        self._entries = CacheEntries(self._root.folder("entries"), max_bytes)
        self.hits = 0  # this process's
        self.misses = 0
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._lookups: LoopTurns[_Lookup] = LoopTurns(self._look_up_turn)
        self._writer = CacheWriter(self._entries, self._release_many, lambda error: self._warn_once("write", error))
        self._claims: NodeClaims | None = None
        try:
            self._claims = NodeClaims(self._root)
        except OSError as error:  # a read-only cache: its ranks fetch what they miss
            self._warn_once("write", error)

    @property
    def size(self) -> int:
        """Bytes the cache holds on disk now, for all processes sharing it."""
        return self._entries.size

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> bytes | None:
        """The cached bytes of ``name``, or None (also when the cache cannot be read: said once
        in a warning; the sample is then fetched)."""
        return self._get_many([name], counted=True)[0]

    async def get_or_claim(self, name: str, *, in_thread: bool = False, poll: float = 0.005) -> tuple[bytes | None, str | None]:
        """``(bytes, None)`` for a cached ``name``; else ``(None, claim)``: this request now holds
        the claim to fetch it, and must `put` it with the claim (or `release` the claim if the
        fetch fails). ``claim`` is None where claims cannot be recorded (then just fetch).

        While another request on the node holds the claim (its fetch is on its way, in another
        rank or this one), this waits for its entry rather than fetching the same object again:
        for a request of this process, until it lets go; for another process's, trying the
        claim again after ``poll`` seconds, then twice as long each time up to 40 ms (the
        kernel tells nothing when another process lets go). A rank that dies lets go of its
        claims at once (see `NodeClaims`); after ``CLAIM_SECONDS`` of waiting, this request
        fetches the entry itself. A hedged copy (`hedged_copy`) does
        not wait: it is sent because a request for the same entry, usually the claim's holder,
        has not answered in time (a stuck connection can hold it to the client's timeout), so it
        fetches the entry itself (``(None, None)``), as it would with no cache; its entry is
        stored without a claim, and whichever copy answers first is used.
        ``in_thread``: read off the calling event loop (entries of megabytes). Otherwise the
        first look of every request made in one loop turn is one native read and one
        pass over the claims (see `_look_up`).
        """
        lapses = time.monotonic() + CLAIM_SECONDS
        look = functools.partial(self._look, [name], counted=True)
        first = await self._received(name, self._in_thread(look) if in_thread else self._look_up(name), shielded=in_thread)
        if first[0] is not _HELD:
            return first[0], first[1]
        if is_hedged_copy():  # sent because the claim's holder is slow: waiting for it gains nothing
            return None, None
        claims = self._claims
        assert claims is not None  # only a claim can be held
        pause = poll
        while True:
            left = lapses - time.monotonic()
            if left <= 0:  # its holder's fetch is stuck (an outage): fetch it too
                return None, None
            released = claims.released(name)
            if released is None:  # held by another process (or let go just now): try again later
                await asyncio.sleep(min(pause, left))
                pause = min(2 * pause, _LONGEST_POLL)
                try_again = functools.partial(self._retry_claim, name)
            else:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(released, left)
                try_again = functools.partial(self._look, [name], counted=False)
            if in_thread:
                again = await self._received(name, self._in_thread(try_again), shielded=True)
            else:
                again = try_again()[0]
            if again[0] is not _HELD:
                return again[0], again[1]

    def _retry_claim(self, name: str) -> list[tuple[Any, str | None]]:
        """`_look` at ``name`` once another process held its claim: the claim first, the entry
        only once the claim is taken (the holder stores its entry before letting go). A try
        that finds it still held costs one lock call, not a read of the store as well."""
        claims = self._claims
        assert claims is not None
        claim = claims.new_claim()
        try:
            taken = claims.take_many([(name, claim)])[0]
        except OSError as error:
            self._warn_once("write", error)
            return [(None, None)]
        if not taken:
            return [(_HELD, None)]
        data = self._get_many([name], counted=False)[0]
        if data is None:
            return [(None, claim)]
        self.release(name, claim)
        return [(data, None)]

    @staticmethod
    def _in_thread(look: Callable[[], list[tuple[Any, str | None]]]) -> asyncio.Future[tuple[Any, str | None]]:
        """What ``look`` finds for its one name, looked for in a worker thread."""
        return asyncio.get_running_loop().run_in_executor(None, _first, look)

    async def _received(self, name: str, look: asyncio.Future[tuple[Any, str | None]], *, shielded: bool) -> tuple[Any, str | None]:
        """What ``look`` found. A request cancelled while it waits (a hedged read's loser) can be
        cancelled after its look took the claim: its claim is let go of, or nobody would fetch
        the sample and every other request for it would wait out ``CLAIM_SECONDS``. A look in a
        worker thread (``shielded``) is left to finish and its claim let go of then. A look of
        the loop's turn is not shielded (a future and two callbacks fewer for every request):
        cancelled before its turn, the turn lets go of the claim it takes (`_look_up_turn`);
        cancelled after, the claim is let go of here."""
        try:
            return await (asyncio.shield(look) if shielded else look)
        except asyncio.CancelledError:
            if shielded or look.done():
                look.add_done_callback(lambda done: self._abandoned(name, done))
            raise

    def _abandoned(self, name: str, look: asyncio.Future[tuple[Any, str | None]]) -> None:
        if not look.cancelled() and look.exception() is None:
            self.release(name, look.result()[1])

    def _look_up(self, name: str) -> asyncio.Future[tuple[Any, str | None]]:
        """`_look` at ``name`` with the other requests of this loop turn (see `LoopTurns`)."""
        future: asyncio.Future[tuple[Any, str | None]] = asyncio.get_running_loop().create_future()
        self._lookups.add((name, future))
        return future

    def _look_up_turn(self, loop: asyncio.AbstractEventLoop, pending: list[_Lookup]) -> None:
        if loop.is_closed():  # stopped before its turn came: its requests wait no more
            return
        outcomes = self._look([name for name, _ in pending], counted=True)
        for (name, future), outcome in zip(pending, outcomes):
            if future.done():  # its request was cancelled before this turn (see `_received`): let go
                self.release(name, outcome[1])
            else:
                future.set_result(outcome)

    def _look(self, names: list[str], *, counted: bool) -> list[tuple[Any, str | None]]:
        """For each of ``names``: ``(bytes, None)`` when cached, ``(None, claim)`` when now
        claimed by this request, ``(None, None)`` when claims cannot be taken (just fetch), or
        ``(_HELD, None)`` when another request on the node holds it. One read of the store for
        all, claims for the misses, and one more read of those claimed (another request may have
        stored one between the read and the claim)."""
        found = self._get_many(names, counted=counted)
        misses = [number for number, data in enumerate(found) if data is None]
        outcomes: list[tuple[Any, str | None]] = [(data, None) for data in found]
        claims = self._claims
        if not misses or claims is None:
            return outcomes
        wanted = [(names[number], claims.new_claim()) for number in misses]
        try:
            taken = claims.take_many(wanted)
        except OSError as error:
            self._warn_once("write", error)
            return outcomes
        claimed = [(number, pair) for number, pair, held in zip(misses, wanted, taken) if held]
        stored = self._get_many([name for _, (name, _) in claimed], counted=False)
        for (number, (name, claim)), data in zip(claimed, stored):
            if data is not None:
                self.release(name, claim)
                outcomes[number] = (data, None)
            else:
                outcomes[number] = (None, claim)
        for number, held in zip(misses, taken):
            if not held:
                outcomes[number] = (_HELD, None)
        return outcomes

    def _get_many(self, names: list[str], *, counted: bool) -> list[bytes | None]:
        """The cached bytes of each of ``names`` (None: not cached, or the cache cannot be read,
        said once in a warning when ``counted``); ``counted``: one hit or miss each."""
        if not names:
            return []
        # What waits for the writer first: it leaves `pending` only once stored, so an entry
        # missing from both was not stored before this look began.
        waiting = [self._writer.pending(name) for name in names]
        wanted = [name for name, data in zip(names, waiting) if data is None]
        try:
            read = self._entries.get_many(wanted) if wanted else []
        except Exception as error:  # a damaged file, a vanished folder
            if counted:
                self._warn_once("read", error)
            read = [None] * len(wanted)
        stored = iter(read)
        found = [next(stored) if data is None else bytes(data) for data in waiting]
        if counted:
            hits = sum(1 for data in found if data is not None)
            with self._lock:
                self.hits += hits
                self.misses += len(found) - hits
        return found

    def put(self, name: str, data: bytes | memoryview, claim: str | None = None) -> None:
        """Keep ``data`` as ``name`` (larger than the whole limit: not kept), and let go of
        ``claim`` (from `get_or_claim`); returns once it is stored."""
        if self._writer.add(name, data, claim, wait=False) is None:
            self._writer.flush()

    async def store(self, name: str, data: bytes | memoryview, claim: str | None = None) -> None:
        """`put`, from an event loop, handed to the cache's writer thread (`CacheWriter`): the
        entry is stored with others waiting, in one store without the GIL, and
        ``claim`` let go of then. Returns at once (this process reads the entry meanwhile from
        what waits), unless more than the writer's bound waits to be stored: then once the
        writer has caught up."""
        room = self._writer.add(name, data, claim)
        if room is not None:
            await room

    def flush(self) -> None:
        """Return once every entry handed to `store` so far is stored (also called by `close`)."""
        self._writer.flush()

    def release(self, name: str, claim: str | None) -> None:
        """Let go of ``claim`` on ``name`` (its fetch failed, or a hedged copy won): another
        request may fetch it. Where ``name``'s entry waits for the writer (the copy's), only
        once it is stored (`CacheWriter.release_after`)."""
        if claim is not None and not self._writer.release_after(name, claim):
            self._release_many([(name, claim)])

    def _release_many(self, held: list[tuple[str, str]]) -> None:
        if not held or self._claims is None:
            return
        try:
            self._claims.release_many(held)
        except OSError as error:
            self._warn_once("write", error)

    def _warn_once(self, what: str, error: Exception) -> None:
        with self._lock:
            if what in self._warned:
                return
            self._warned.add(what)
        outcome = "samples are fetched instead" if what == "read" else "samples are not kept in it"
        _logger.warning("sample cache %s: cannot %s it (%s: %s); %s", self.folder, what, type(error).__name__, error, outcome)

    def close(self) -> None:
        """Store what waits, and release this process's handles (the entries stay)."""
        self._writer.close()
        self._entries.close()
        if self._claims is not None:
            self._claims.close()


def _first(look: Callable[[], list[tuple[Any, str | None]]]) -> tuple[Any, str | None]:
    """What ``look`` found for its one name (run in a worker thread)."""
    return look()[0]
