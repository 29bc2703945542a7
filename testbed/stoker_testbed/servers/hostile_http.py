"""A hostile HTTP server on loopback, for the fault and fuzz suites: it serves honest files, and
answers the requests a test names as the test says, byte for byte, the way no well-behaved server
library would: a ``Content-Length`` of 10^12, of -1 or two of them, a ``Content-Range`` for other
bytes, a body that trickles or never ends, redirects in loops and to another origin, a status
line of garbage.

It listens on two ports of 127.0.0.1, the home origin and another one; ``localhost`` on the home
port is a third origin (another host name). Every request either port received is recorded
(`requests`: its origin, method, target and headers), so a test can check what reached an origin
the user did not name. It runs in a thread of the test process (the client under test runs in
a child, so a crash there is judged, not suffered).

    with HostileHttpServer() as server:
        server.files["data/a.jpg"] = b"..."
        server.answer("data/a.jpg", Answer(b"200 OK", [("Content-Length", "1000000000000")], b"abc"))
        ... open server.url("data/a.jpg") ...
        assert not server.requests_to_other_origins()
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import unquote, urlsplit

__all__ = ["Answer", "HostileHttpServer", "Received"]

_REQUEST_HEAD_LIMIT = 64 << 10  # a request's line and headers: a client that sends more is dropped


@dataclass(frozen=True)
class Answer:
    """One scripted response.

    Attributes:
        status: What follows ``HTTP/1.1 `` on the status line (``b"200 OK"``; anything at all).
        headers: Header lines as sent, in order, duplicates allowed (``{home}``, ``{other}`` and
            ``{other_host}`` in a value become those origins' ``http://host:port``), then
            ``Connection: close`` unless they name a ``Connection`` (a scripted answer ends its
            connection: its framing may be anything).
        body: The body (sent as it is: its length need not match any header).
        piece: Bytes per write of the body (0: all at once).
        pause: Seconds between pieces (a trickle).
        endless: After the body, zeros until the client goes (a flood).
        body_on_head: Send the body (and the flood) after a HEAD too (no honest server does).
        times: Requests answered this way, then the honest answer again (None: every one).
    """

    status: bytes = b"200 OK"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    piece: int = 0
    pause: float = 0.0
    endless: bool = False
    body_on_head: bool = False
    times: int | None = None


@dataclass
class _Script:
    """An answer and how many more requests it answers (None: every one)."""

    answer: Answer
    left: int | None


@dataclass(frozen=True)
class Received:
    """One request as the server saw it: which origin (``"home"``, ``"other"`` or
    ``"other_host"``: ``localhost`` on the home port), its method, target and headers (names in
    lower case)."""

    origin: str
    method: str
    target: str
    headers: dict[str, str] = field(default_factory=dict)


class HostileHttpServer:
    """Honest files (GET, ranged GET, HEAD; 404 otherwise) and scripted answers, on two ports.

    Attributes:
        files: Path (no leading ``/``, not quoted) to bytes, served honestly by both origins.
        requests: Every request received, in order.
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[Received] = []
        self._answers: dict[tuple[str | None, str | None, str], _Script] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.base_events.Server] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hostile-http", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        self.home_port, self.other_port = (server.sockets[0].getsockname()[1] for server in self._servers)

    # ---- what tests use ---------------------------------------------------------------------

    @property
    def home(self) -> str:
        return f"http://127.0.0.1:{self.home_port}"

    @property
    def other(self) -> str:
        return f"http://127.0.0.1:{self.other_port}"

    @property
    def other_host(self) -> str:
        return f"http://localhost:{self.home_port}"

    def url(self, path: str) -> str:
        """``path`` on the home origin."""
        return f"{self.home}/{path}"

    def answer(self, path: str, answer: Answer, *, method: str | None = None, origin: str | None = None) -> None:
        """Answer requests for ``path`` with ``answer`` (its ``times`` of them, or every one):
        those of ``method`` and to ``origin`` (``"home"``, ``"other"``, ``"other_host"``) only,
        where given."""
        with self._lock:
            self._answers[(origin, method, "/" + path.lstrip("/"))] = _Script(answer, answer.times)

    def reset(self) -> None:
        """Forget the scripted answers and the recorded requests (files stay)."""
        with self._lock:
            self._answers.clear()
            self.requests.clear()

    def requests_to_other_origins(self) -> list[Received]:
        """The requests received on an origin other than home."""
        with self._lock:
            return [request for request in self.requests if request.origin != "home"]

    def close(self) -> None:
        if self._loop.is_closed() or not self._thread.is_alive():
            return

        async def stop() -> None:
            for server in self._servers:
                server.close()
            for task in [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]:
                task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> HostileHttpServer:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()

    # ---- serving --------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            for name in ("home", "other"):
                self._servers.append(await asyncio.start_server(lambda r, w, name=name: self._serve(name, r, w), "127.0.0.1", 0))

        self._loop.run_until_complete(start())
        self._loop.call_soon(self._ready.set)
        self._loop.run_forever()

    async def _serve(self, port_name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one request after another until the client or an answer closes
                head = await self._read_head(reader)
                if head is None:
                    return
                method, target, headers = head
                origin = "other_host" if port_name == "home" and headers.get("host", "").startswith("localhost") else port_name
                path = urlsplit(target).path
                with self._lock:
                    self.requests.append(Received(origin, method, target, headers))
                    scripted = self._take(origin, method, path)
                if scripted is not None:
                    await self._send_scripted(writer, scripted, with_body=method != "HEAD" or scripted.body_on_head)
                    return  # a scripted answer ends its connection: its framing may be anything
                writer.write(self._honest(method, unquote(path).lstrip("/"), headers))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return
        finally:
            writer.close()

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]] | None:
        data = b""
        while not data.endswith(b"\r\n\r\n"):
            line = await reader.readline()
            if not line:
                return None
            data += line
            if len(data) > _REQUEST_HEAD_LIMIT:
                return None
            if data == b"\r\n":  # a blank line between requests
                data = b""
        lines = data.decode("latin-1").split("\r\n")
        method, target, _ = (lines[0].split(" ") + ["", ""])[:3]
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        return method, target, headers

    def _take(self, origin: str, method: str, path: str) -> Answer | None:
        for key in ((origin, method, path), (origin, None, path), (None, method, path), (None, None, path)):
            script = self._answers.get(key)
            if script is None or script.left == 0:
                continue
            if script.left is not None:
                script.left -= 1
            return script.answer
        return None

    def _origins(self, text: str) -> str:
        return text.replace("{home}", self.home).replace("{other_host}", self.other_host).replace("{other}", self.other)

    async def _send_scripted(self, writer: asyncio.StreamWriter, answer: Answer, *, with_body: bool) -> None:
        head = b"HTTP/1.1 " + answer.status + b"\r\n"
        for name, value in answer.headers:
            head += f"{name}: {self._origins(value)}\r\n".encode("latin-1", "replace")
        if not any(name.lower() == "connection" for name, _ in answer.headers):
            head += b"Connection: close\r\n"
        writer.write(head + b"\r\n")
        if not with_body:
            await writer.drain()
            return
        body = answer.body
        step = answer.piece or max(1, len(body))
        for start in range(0, len(body), step):
            writer.write(body[start : start + step])
            await writer.drain()
            if answer.pause:
                await asyncio.sleep(answer.pause)
        while answer.endless:
            writer.write(bytes(64 << 10))
            await writer.drain()
        await writer.drain()

    def _honest(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        data = self.files.get(path)
        if data is None or method not in ("GET", "HEAD"):
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        tag = hashlib.sha256(data).hexdigest()[:16]
        common = f'ETag: "{tag}"\r\nLast-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\nAccept-Ranges: bytes\r\n'
        wanted = headers.get("range", "")
        if method == "GET" and wanted.startswith("bytes="):
            first, _, last = wanted[6:].partition("-")
            if first.isdigit() and last.isdigit() and int(first) <= int(last) < len(data):
                part = data[int(first) : int(last) + 1]
                return (
                    f"HTTP/1.1 206 Partial Content\r\n{common}Content-Range: bytes {first}-{last}/{len(data)}\r\n"
                    f"Content-Length: {len(part)}\r\n\r\n"
                ).encode() + part
            return f"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len(data)}\r\nContent-Length: 0\r\n\r\n".encode()
        head = f"HTTP/1.1 200 OK\r\n{common}Content-Length: {len(data)}\r\n\r\n".encode()
        return head if method == "HEAD" else head + data
