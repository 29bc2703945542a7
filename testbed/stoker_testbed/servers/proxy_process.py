"""The latency proxy in a child process, so that benchmarks do not share their interpreter (and
its GIL) with the proxy's byte shuffling: every loader compared pays the same proxy cost."""

from __future__ import annotations

import argparse
import subprocess
import sys
from types import TracebackType

from stoker_testbed.servers.latency_proxy import LatencyProxy

__all__ = ["ProxyProcess"]


class ProxyProcess:
    """``with ProxyProcess(port, delay=0.025) as proxy:`` then connect to ``proxy.port``.

    Args: as `LatencyProxy` (target host and port, one-way delay, jitter, slow connections).
    """

    def __init__(
        self,
        target_port: int,
        *,
        target_host: str = "127.0.0.1",
        delay: float = 0.0,
        jitter: float = 0.0,
        slow_fraction: float = 0.0,
        slow_factor: float = 10.0,
        seed: int = 0,
    ) -> None:
        self.command = [
            sys.executable,
            "-m",
            "stoker_testbed.servers.proxy_process",
            target_host,
            str(target_port),
            "--delay",
            str(delay),
            "--jitter",
            str(jitter),
            "--slow-fraction",
            str(slow_fraction),
            "--slow-factor",
            str(slow_factor),
            "--seed",
            str(seed),
        ]
        self.port = 0
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> ProxyProcess:
        self._process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            self.__exit__(None, None, None)
            raise RuntimeError(f"the latency proxy did not start: {' '.join(self.command)}")
        self.port = int(line)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        process, self._process = self._process, None
        if process is not None:
            assert process.stdin is not None
            process.stdin.close()  # the child stops when its stdin closes
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _serve() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target_host")
    parser.add_argument("target_port", type=int)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--jitter", type=float, default=0.0)
    parser.add_argument("--slow-fraction", type=float, default=0.0)
    parser.add_argument("--slow-factor", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    with LatencyProxy(
        arguments.target_host,
        arguments.target_port,
        delay=arguments.delay,
        jitter=arguments.jitter,
        slow_fraction=arguments.slow_fraction,
        slow_factor=arguments.slow_factor,
        seed=arguments.seed,
    ) as proxy:
        print(proxy.address[1], flush=True)
        sys.stdin.read()  # until the parent closes our stdin (or dies)


if __name__ == "__main__":
    _serve()
