"""A plain HTTP file server on loopback, as public datasets are published (a web server or a CDN
in front of a folder of shards): aiohttp's static file handler, run as a child process so a test
can kill it mid-epoch and start it again on the same port.

It answers ``GET`` with ``Range`` (206 and the slice), ``HEAD`` with the size, ``ETag`` and
``Last-Modified``, and 404 for what is not there: the calls `HTTPStorage` makes. With a token it
answers 401 to any request without ``Authorization: Bearer <token>`` (a private dataset).

Run by hand: ``python -m stoker_testbed.servers.http_server --root DIR --port 8000``.

`StdlibFileServer` is Python's own ``python -m http.server``, as a user starts it in a folder of
shards: it answers a ranged GET with the whole file (it serves no ranges), and its log names every
request, so a test counts what was fetched.
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from stoker_testbed.servers.server import ServerProcess, free_port, wait_for_port

__all__ = ["HttpFileServer", "StdlibFileServer"]

_TOKEN_VARIABLE = "STOKER_TEST_HTTP_TOKEN"


class HttpFileServer(ServerProcess):
    """``with HttpFileServer() as server:`` then files under ``server.root`` are at
    ``server.url("name")``.

    Args:
        port: Port (default: a free one). A restart keeps the port and the files.
        host: The address it listens on.
        token: Answer only requests that carry ``Authorization: Bearer <token>``.
    """

    name = "http-file-server"
    startup_timeout = 30.0

    def __init__(self, port: int | None = None, *, host: str = "127.0.0.1", token: str | None = None) -> None:
        super().__init__()
        self.host = host
        self.port = port or free_port()
        self.token = token
        self.root = self.workdir / "files"
        self.root.mkdir()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, name: str = "") -> str:
        """The URL of file ``name`` under the root."""
        return f"{self.endpoint}/{name}"

    def put(self, name: str, data: bytes) -> Path:
        """Write file ``name`` under the root (served from the next request on)."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def _command(self) -> Sequence[str]:
        return [
            sys.executable,
            "-m",
            "stoker_testbed.servers.http_server",
            "--root",
            str(self.root),
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]

    def _child_environment(self) -> dict[str, str] | None:
        environment = {key: value for key, value in os.environ.items() if key != _TOKEN_VARIABLE}
        if self.token is not None:
            environment[_TOKEN_VARIABLE] = self.token
        return environment

    def _ready(self) -> bool:
        if not wait_for_port(self.host, self.port, 0.2):
            return False
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(self.url(".ready"), headers=headers), timeout=2) as response:
                return response.status == 200
        except OSError:
            return False


class StdlibFileServer(ServerProcess):
    """``python -m http.server`` serving ``root`` on loopback: ``with StdlibFileServer(folder) as
    server:`` then ``server.url("name")``.

    Args:
        root: The folder served (as a user would start it there).
        port: Port (default: a free one).
    """

    name = "python-http-server"
    startup_timeout = 30.0

    def __init__(self, root: Path, port: int | None = None) -> None:
        super().__init__()
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.root = root

    def url(self, name: str = "") -> str:
        """The URL of file ``name`` under the root."""
        return f"http://{self.host}:{self.port}/{name}"

    def requests(self, method: str = "GET") -> list[str]:
        """The paths asked for by ``method`` so far, as its log names them, in order."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [line.split(f'"{method} ', 1)[1].split(" ", 1)[0] for line in text.splitlines() if f'"{method} ' in line]

    def _command(self) -> Sequence[str]:
        return [sys.executable, "-u", "-m", "http.server", str(self.port), "--bind", self.host, "--directory", str(self.root)]

    def _ready(self) -> bool:
        return wait_for_port(self.host, self.port, 0.2)


def _serve(root: Path, host: str, port: int, token: str | None) -> None:
    from aiohttp import web

    (root / ".ready").write_bytes(b"ok")

    @web.middleware
    async def bearer(request: web.Request, handler):  # type: ignore[no-untyped-def]
        if token is not None and request.headers.get("Authorization") != f"Bearer {token}":
            raise web.HTTPUnauthorized(text="a bearer token is required")
        return await handler(request)

    app = web.Application(middlewares=[bearer])
    app.router.add_static("/", root, show_index=False, follow_symlinks=False)
    web.run_app(app, host=host, port=port, print=None, access_log=None)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, required=True, help="the folder served")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    arguments = parser.parse_args(argv)
    _serve(arguments.root, arguments.host, arguments.port, os.environ.get(_TOKEN_VARIABLE))


if __name__ == "__main__":
    main()
