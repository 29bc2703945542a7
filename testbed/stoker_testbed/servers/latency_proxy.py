"""A loopback TCP proxy that delays each direction, to put 20/50/150 ms of round trip between a
loader and a storage server on one machine (this kernel has no netem).

Each connection's bytes keep their order and are delivered ``delay`` seconds after they arrived
(times a lognormal jitter), so the proxy adds latency without capping bandwidth. A
``slow_fraction`` of connections gets ``slow_factor`` times the delay (a heavy tail: congested
routes). `kill_connections` drops every open connection, as a network fault would;
`cut_responses` makes the next replies die mid-flight, a fault that lands on in-flight requests
whatever the timing. It listens on loopback only. With ``tls``, it is a TLS server in front of a
plain one (the certificate a test's private CA signed: `stoker_testbed.servers.tls`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import ssl
import threading
from types import TracebackType

__all__ = ["LatencyProxy"]


class LatencyProxy:
    """``with LatencyProxy("127.0.0.1", 9042, delay=0.025) as proxy:`` then connect to
    ``proxy.address``.

    Args:
        target_host, target_port: Where connections go.
        delay: One-way delay in seconds (the round trip gains twice this).
        jitter: Sigma of a lognormal factor on each chunk's delay (0: none).
        slow_fraction: Share of connections that are ``slow_factor`` times slower.
        slow_factor: How much slower those are.
        listen_host: A loopback address.
        seed: Seeds the jitter and the choice of slow connections.
        tls: Serve TLS with this context (the target is spoken to in plain TCP).

    Raises:
        ValueError: A listen address that is not loopback, or a negative delay.
    """

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        delay: float = 0.0,
        jitter: float = 0.0,
        slow_fraction: float = 0.0,
        slow_factor: float = 10.0,
        listen_host: str = "127.0.0.1",
        seed: int = 0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if not ipaddress.ip_address(listen_host).is_loopback:
            raise ValueError(f"the proxy listens on loopback only, not {listen_host}")
        if delay < 0 or jitter < 0 or not 0 <= slow_fraction <= 1:
            raise ValueError("delay and jitter must be >= 0 and slow_fraction within [0, 1]")
        self.target = (target_host, target_port)
        self.delay = delay
        self.jitter = jitter
        self.slow_fraction = slow_fraction
        self.slow_factor = slow_factor
        self.listen_host = listen_host
        self.tls = tls
        self._random = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="stoker-latency-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.address: tuple[str, int] = (listen_host, 0)
        self.connections = 0
        self._cuts_left = 0
        self._cut_after = 0

    def start(self) -> tuple[str, int]:
        """Start listening; returns (host, port) to connect to."""
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, self.listen_host, 0, ssl=self.tls), self._loop
        ).result()
        self.address = self._server.sockets[0].getsockname()[:2]
        return self.address

    def kill_connections(self) -> None:
        """Drop every open connection (both sides see a reset or end of stream)."""

        async def kill() -> None:
            for writer in list(self._writers):
                writer.transport.abort()
            self._writers.clear()

        asyncio.run_coroutine_threadsafe(kill(), self._loop).result()

    def cut_responses(self, count: int, *, after_bytes: int = 0) -> None:
        """Make the next ``count`` responses from the target end their connections: the client
        has sent its request and sees the connection reset, so the fault hits a request in
        flight, deterministically (a timed `kill_connections` may find only idle connections,
        which a client reopens without noticing). With ``after_bytes``, the cut comes once that
        many bytes have come back on the connection: a large body cut short mid-read."""

        async def arm() -> None:
            self._cuts_left += count
            self._cut_after = after_bytes

        asyncio.run_coroutine_threadsafe(arm(), self._loop).result()

    @property
    def cuts_left(self) -> int:
        """How many of the cuts asked of `cut_responses` have not happened yet."""
        return self._cuts_left

    def stop(self) -> None:
        """Close the listener and every connection, end the thread and close its event loop
        (idempotent; a proxy never started only closes the loop)."""
        if not self._thread.is_alive():
            self._close_loop()
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            # Aborted connections end their tasks; give them a moment before cancelling (a
            # cancelled connection task makes asyncio's stream callback log an error).
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            if others:
                _, stuck = await asyncio.wait(others, timeout=1.0)
                for task in stuck:
                    task.cancel()
                await asyncio.gather(*stuck, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._close_loop()

    def _close_loop(self) -> None:
        """Close the event loop once its thread has ended (a loop left open is a ResourceWarning
        when collected, which a later test recording warnings sees as its own)."""
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()

    def __enter__(self) -> LatencyProxy:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.stop()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        slow = self._random.random() < self.slow_fraction
        delay = self.delay * (self.slow_factor if slow else 1.0)
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers.update((client_writer, server_writer))
        await asyncio.gather(
            self._pipe(client_reader, server_writer, delay),
            self._pipe(server_reader, client_writer, delay, cut=(client_writer, server_writer)),
            return_exceptions=True,
        )
        for writer in (client_writer, server_writer):
            self._writers.discard(writer)
            writer.transport.abort()

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        delay: float,
        cut: tuple[asyncio.StreamWriter, ...] = (),
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if data is None:  # the cut, after the bytes before it arrived
                    for end in cut:
                        end.transport.abort()
                    return
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        delivering = asyncio.ensure_future(deliver())
        last_due = 0.0
        passed = 0  # bytes of this connection's responses let through
        try:
            while True:
                data = await reader.read(65536)
                if data and cut and self._cuts_left > 0 and passed + len(data) > self._cut_after:
                    self._cuts_left -= 1
                    if passed < self._cut_after:
                        queue.put_nowait((last_due, data[: self._cut_after - passed]))
                    queue.put_nowait((last_due, None))
                    await delivering
                    return
                passed += len(data)
                factor = self._random.lognormvariate(0, self.jitter) if self.jitter else 1.0
                # Bytes keep their order: a chunk is never due before the one ahead of it.
                last_due = max(last_due, loop.time() + delay * factor)
                queue.put_nowait((last_due, data))
                if not data:
                    break
            await delivering
        finally:
            delivering.cancel()
