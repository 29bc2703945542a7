"""A storage server run as a child process for tests and benchmarks: start, wait until ready,
stop without leaking the process.

Servers come from the package registries (jars from Maven Central) and are cached in
``$STOKER_SERVER_CACHE`` (default ``~/.cache/stoker/servers``), outside the per-test data cache,
so a rerun starts in seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

__all__ = ["ServerError", "ServerProcess", "free_port", "installing", "server_cache", "wait_for_port"]


class ServerError(RuntimeError):
    """A server could not be installed or did not start; the message says why and where its log is."""


def server_cache(*parts: str) -> Path:
    """The folder for downloaded servers, created."""
    base = Path(os.environ.get("STOKER_SERVER_CACHE", Path.home() / ".cache" / "stoker" / "servers"))
    folder = base.joinpath(*parts)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def installing(folder: Path) -> Iterator[None]:
    """Hold the install lock of a server's cache ``folder``: test processes that run side by side
    (pytest-xdist's workers) each start their own servers, and the first to need one installs it
    while the others wait, then find it installed (check again inside the lock)."""
    with open(folder / ".install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    """True once ``host:port`` accepts a connection, False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def require_java() -> str:
    """The ``java`` executable (17 or newer is needed by both servers).

    Raises:
        ServerError: No java on PATH.
    """
    java = shutil.which("java")
    if java is None:
        raise ServerError("java is not installed (a JDK 17 or newer runs the test servers)")
    return java


class ServerProcess:
    """A child process with a private work folder and a log file.

    Subclasses build the command in `_command` (after preparing files in ``self.workdir``) and
    say when the server is ready in `_ready`.
    """

    name = "server"
    startup_timeout = 120.0
    stop_signal = signal.SIGTERM
    prefix: Sequence[str] = ()
    """Put before the command: e.g. a host's ``ip netns exec`` (testbed/stoker_testbed/hosts.py)."""

    def __init__(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix=f"stoker-{self.name}-"))
        self.log_path = self.workdir / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    def _command(self) -> Sequence[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    def _child_environment(self) -> dict[str, str] | None:
        """The server's environment (default: ours); secrets go here, never on its command line."""
        return None

    def start(self) -> None:
        """Start the server and wait until it serves.

        Raises:
            ServerError: It exited, or was not ready within ``startup_timeout`` (the log's tail
                is in the message).
        """
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the process without waiting for it to serve (several servers start together)."""
        command = [*self.prefix, *self._command()]
        with open(self.log_path, "ab") as log:
            # A session of its own: Ctrl-C in the test run reaches us, and we stop it cleanly.
            self._process = subprocess.Popen(
                command, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=self._child_environment()
            )

    def wait_ready(self) -> None:
        """Wait until the launched server serves (see `start`)."""
        self._wait(self._ready, self.startup_timeout)

    def kill(self) -> None:
        """SIGKILL the server, as a crash or a lost machine would stop it (the data stays)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def _wait(self, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise ServerError(f"{self.name} exited while starting:\n{self.log_tail()}")
            if ready():
                return
            time.sleep(0.2)
        self.stop()
        raise ServerError(f"{self.name} was not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        return "\n".join(text[-lines:]) + f"\n(full log: {self.log_path})"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the server (``stop_signal``, then SIGKILL after ``timeout``). Idempotent."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, self.stop_signal)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def close(self) -> None:
        """End the server and delete the work folder. SIGKILL: its data is deleted next, so a
        graceful stop (a Cassandra node drains for up to 20 s) would only cost time."""
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()
