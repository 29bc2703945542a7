"""Several hosts on one machine, for tests of what crosses a network.

Each host is a network namespace of its own (a real, separate network stack: its own interfaces,
addresses, routes and sockets) joined by a veth pair to one bridge, and it has a local disk of its
own: a folder that every process started on the host sees at the same path (`HOST_DISK`), bind
mounted in the private mount namespace that ``ip netns exec`` gives each process. The bridge lives
in the test's own namespace with an address of its own, so the test process reaches every host
(to upload data, read a server's log) the way a host would.

Links are shaped in the kernel where this machine's kernel can: the bridge drops packets (nftables
rules in its forwarding path, bridge family), at random for loss and between two hosts' ports for
a partition, so neither end sees an error (connections time out, as across a real partition,
instead of being refused at once); bandwidth is a token bucket (``tc tbf``) on a host's interface. The kernel
here has no ``netem``, so latency is added in user space: a latency proxy on the client host's
own loopback forwards to the far host with the delay (`delayed_route`).

Everything is torn down by `close` (and by ``with``), also when a test fails: the processes
started on the hosts, the namespaces, the bridge. Names carry the test process's id, and each
network takes a /24 that no other on the machine holds, so two test runs on one machine do not
meet. Addresses are in 10.231.0.0/16, only inside the namespaces this harness creates.

Needs root (``ip netns add``): `unavailable` says why not, for a clear skip.
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["HOST_DISK", "Host", "HostNetwork", "rank_reports", "start_python", "unavailable"]

# Where every host sees its own local disk (a different folder on each host).
HOST_DISK = Path("/tmp/stoker-host-disk")
_SUBNET = "10.231"


def _ip(*arguments: str, namespace: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = ["ip", *(["netns", "exec", namespace, "ip"] if namespace else []), *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=check)


def _in(namespace: str, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", namespace, *command], capture_output=True, text=True, check=check)


def unavailable() -> str | None:
    """Why hosts cannot be made here (not root, no ``ip``, namespaces refused), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"the {tool} command is missing (apt-get install {package})"
    probe = f"stk-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add was refused: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@dataclass
class Host:
    """One host: its name, namespace, address and local disk."""

    name: str
    namespace: str
    address: str
    disk: Path
    port: str  # the bridge's port to it (its interface in the test's namespace)
    routed: set[str] = field(default_factory=set)  # hosts it reaches through a latency proxy
    processes: list[subprocess.Popen[Any]] = field(default_factory=list)

    def prefix(self) -> list[str]:
        """The command prefix that runs a program on this host: in its network namespace, with
        its own host name (a UTS namespace: programs that look themselves up, as torch's
        rendezvous does, find this host's address), its disk mounted at `HOST_DISK`."""
        disk = shlex.quote(str(self.disk))
        # A crash says what it was: Python's stack on a fatal signal, glibc's own message (a heap
        # check) on standard error rather than a terminal the test never reads.
        setup = (
            "export PYTHONFAULTHANDLER=1 LIBC_FATAL_STDERR_=1 && "
            f'hostname {self.name} && mkdir -p {HOST_DISK} && mount --bind {disk} {HOST_DISK} && exec "$@"'
        )
        return ["ip", "netns", "exec", self.namespace, "unshare", "--uts", "sh", "-c", setup, self.name]


class HostNetwork:
    """``with HostNetwork(["h0", "h1", "store"]) as network:`` then `run` programs on hosts,
    `shape` links, `partition` and `heal` pairs of hosts, `kill` a host.

    Args:
        names: The hosts, in order (addresses 10.231.N.1, 10.231.N.2, ...).
        root: Where the hosts' disks are made (default: a new temporary folder).
    """

    def __init__(self, names: Sequence[str], root: Path | None = None) -> None:
        self.tag = f"{os.getpid() % 100000}"
        self.root = root or Path(tempfile.mkdtemp(prefix="stoker-hosts-"))
        self.bridge = f"stkbr{self.tag}"
        self.subnet = ""  # chosen when the bridge is made (`_create`)
        self.gateway = ""
        self.hosts: dict[str, Host] = {}
        self._names = list(names)
        self._loss: dict[str, float] = {}
        self._partitions: set[frozenset[str]] = set()

    def __enter__(self) -> HostNetwork:
        _remove_stale()
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()

    def _create(self) -> None:
        # Another test run on this machine may be choosing its subnet now: one at a time.
        with open("/run/stoker-hosts.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.subnet = _free_subnet()
            self.gateway = f"{self.subnet}.254"
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        table = f"add table bridge {self.bridge}\nadd chain bridge {self.bridge} forward {{ type filter hook forward priority 0; }}\n"
        subprocess.run(["nft", "-f", "-"], input=table, text=True, check=True, capture_output=True)
        for number, name in enumerate(self._names, start=1):
            namespace = f"stk{self.tag}-{name}"
            port = f"stk{self.tag}p{number}"
            disk = self.root / name
            disk.mkdir(parents=True, exist_ok=True)
            host = Host(name, namespace, f"{self.subnet}.{number}", disk, port)
            self.hosts[name] = host
            _ip("netns", "add", namespace)
            _ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", namespace)
            _ip("link", "set", port, "master", self.bridge, "up")
            _ip("addr", "add", f"{host.address}/24", "dev", "eth0", namespace=namespace)
            _ip("link", "set", "eth0", "up", namespace=namespace)
            _ip("link", "set", "lo", "up", namespace=namespace)
        for host in self.hosts.values():
            self._write_names(host)

    def _write_names(self, host: Host) -> None:
        """``host``'s /etc/hosts (``ip netns exec`` mounts /etc/netns/<namespace>/hosts over it):
        every host by name, and ``<target>.from-<host>``, the name a target has from this host
        (a server's log then tells which host asked; `delayed_route` points it at the proxy)."""
        folder = Path("/etc/netns") / host.namespace
        folder.mkdir(parents=True, exist_ok=True)
        lines = ["127.0.0.1 localhost", "::1 localhost"]
        for other in self.hosts.values():
            seen_at = "127.0.0.1" if other.name in host.routed else other.address
            lines += [f"{other.address} {other.name}", f"{seen_at} {other.name}.from-{host.name}"]
        with open(folder / "hosts", "w") as file:  # rewritten in place: processes already running see it
            file.write("\n".join(lines) + "\n")

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def run(
        self, host: str, command: Sequence[str], *, env: Mapping[str, str] | None = None, log: Path | None = None, cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` on ``host`` (its own session: `kill` ends it and its children)."""
        where = self.hosts[host]
        output = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - the child holds it
        try:
            process = subprocess.Popen(
                [*where.prefix(), *command],
                env={**os.environ, **(env or {})},
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                start_new_session=True,
            )
        finally:
            if log is not None:
                output.close()  # type: ignore[union-attr]
        where.processes.append(process)
        return process

    def shape(self, host: str, *, loss_percent: float = 0.0, rate_mbit: float | None = None) -> None:
        """Shape ``host``'s link: the switch drops ``loss_percent`` of the packets it sends and of
        those it receives, and what it sends is capped at ``rate_mbit`` (a token bucket on its
        interface). Latency is the per-host proxy's (`delayed_route`): this machine's kernel has
        no netem."""
        self._loss[host] = loss_percent
        self._write_switch_rules()
        where = self.hosts[host]
        _in(where.namespace, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
        if rate_mbit:
            rate = f"{rate_mbit}mbit"
            _in(where.namespace, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "64kb", "latency", "200ms")

    def partition(self, first: str, second: str) -> None:
        """Cut ``first`` and ``second`` apart: the switch silently drops what either sends the
        other (connections time out, as across a real partition)."""
        self._partitions.add(frozenset((first, second)))
        self._write_switch_rules()

    def heal(self, first: str, second: str) -> None:
        """Undo `partition`."""
        self._partitions.discard(frozenset((first, second)))
        self._write_switch_rules()

    def _write_switch_rules(self) -> None:
        """The bridge's forwarding rules (nftables, bridge family), written anew from the losses
        and partitions: packets are dropped in the switch, so neither end sees an error."""
        rules = []
        for name, loss in self._loss.items():
            if loss:
                port, per_mille = self.hosts[name].port, str(round(loss * 10))
                rules += [
                    f"iifname {port} numgen random mod 1000 < {per_mille} drop",
                    f"oifname {port} numgen random mod 1000 < {per_mille} drop",
                ]
        for pair in self._partitions:
            first, second = (self.hosts[name].port for name in sorted(pair))
            rules += [f"iifname {first} oifname {second} drop", f"iifname {second} oifname {first} drop"]
        script = f"flush chain bridge {self.bridge} forward\n" + "".join(
            f"add rule bridge {self.bridge} forward {rule}\n" for rule in rules
        )
        subprocess.run(["nft", "-f", "-"], input=script, text=True, check=True, capture_output=True)

    def delayed_route(self, host: str, target: str, port: int, *, delay: float, jitter: float = 0.0) -> int:
        """A latency proxy on ``host``'s own loopback that forwards to ``target``'s ``port``
        with ``delay`` seconds each way; returns the port to connect to on ``host``, where the
        name ``<target>.from-<host>`` now leads to the proxy."""
        process = subprocess.Popen(
            [
                *self.hosts[host].prefix(),
                sys.executable,
                "-m",
                "stoker_testbed.servers.proxy_process",
                self.hosts[target].address,
                str(port),
            ]
            + ["--delay", str(delay), "--jitter", str(jitter)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # runpy's warning that stoker_testbed imported the module first
            text=True,
            start_new_session=True,
        )
        self.hosts[host].processes.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the latency proxy on {host} did not start")
        self.hosts[host].routed.add(target)
        self._write_names(self.hosts[host])
        return int(line)

    def kill(self, host: str) -> None:
        """SIGKILL every process started on ``host`` (a host lost at once), and take its link down."""
        where = self.hosts[host]
        for process in where.processes:
            _kill_group(process)
        _kill_namespace(where.namespace)
        subprocess.run(["ip", "link", "set", where.port, "down"], capture_output=True)

    def close(self) -> None:
        """Stop everything on every host and remove the hosts and the bridge (idempotent)."""
        for host in self.hosts.values():
            for process in host.processes:
                _kill_group(process)
            _remove_namespace(host.namespace)
            subprocess.run(["ip", "link", "del", host.port], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        subprocess.run(["nft", "delete", "table", "bridge", self.bridge], capture_output=True)
        self.hosts.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def _free_subnet() -> str:
    """A /24 of 10.231.0.0/16 that no interface here has an address in (two networks on one
    subnet would route each other's packets astray)."""
    listing = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    taken = {int(number) for number in re.findall(rf"inet {re.escape(_SUBNET)}\.(\d+)\.", listing)}
    for offset in range(250):
        number = (os.getpid() + offset) % 250
        if number not in taken:
            return f"{_SUBNET}.{number}"
    raise RuntimeError(f"every /24 of {_SUBNET}.0.0/16 is in use on this machine")


def _kill_namespace(namespace: str) -> None:
    """SIGKILL every process in ``namespace`` (also those not started through `run`)."""
    for pid in subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _remove_namespace(namespace: str) -> None:
    """End ``namespace``'s processes, delete it and its /etc/netns folder."""
    _kill_namespace(namespace)
    subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
    shutil.rmtree(Path("/etc/netns") / namespace, ignore_errors=True)


def _kill_group(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _remove_stale() -> None:
    """Remove what an earlier test run left when it was killed before its tear-down: hosts whose
    test process (the number in their names) no longer runs."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    stale = {name.split("-")[0] for name in listing if name.startswith("stk") and "-" in name}
    for tag in stale:
        if Path(f"/proc/{tag.removeprefix('stk')}").exists():
            continue  # a test run still going
        for namespace in (name for name in listing if name.startswith(f"{tag}-")):
            _remove_namespace(namespace)
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines()
        for line in links:
            name = line.split(": ")[1].split("@")[0] if ": " in line else ""
            if name.startswith(f"{tag}p") or name == f"stkbr{tag.removeprefix('stk')}":
                subprocess.run(["ip", "link", "del", name], capture_output=True)
        subprocess.run(["nft", "delete", "table", "bridge", f"stkbr{tag.removeprefix('stk')}"], capture_output=True)


def start_python(network: HostNetwork, host: str, code: str, arguments: Sequence[str], cwd: Path) -> subprocess.Popen[str]:
    """``python -c code arguments...`` on ``host``, its output piped (for `rank_reports`)."""
    command = [*network[host].prefix(), sys.executable, "-X", "faulthandler", "-c", code, *arguments]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)


def rank_reports(processes: Sequence[subprocess.Popen[str]], timeout: float) -> list[Any]:
    """Each process's last output line as JSON, in order, once all have ended.

    Every process's output is read as it comes (one read after another, a rank that wrote more
    than a pipe holds would block, and the ranks waiting for it at a barrier with it). Once one
    fails, the others are killed: they would wait for it at the job's next barrier.

    Raises:
        SystemExit: A process failed (the first to fail, the end of its standard error in the
            message), or they ran past ``timeout`` seconds (all killed).
    """
    import json

    outputs: list[tuple[str, str]] = [("", "")] * len(processes)

    def read(number: int) -> None:
        outputs[number] = processes[number].communicate()

    readers = [threading.Thread(target=read, args=(number,), daemon=True) for number in range(len(processes))]
    for reader in readers:
        reader.start()

    def first_failed() -> int | None:
        return next((number for number, process in enumerate(processes) if process.poll() not in (None, 0)), None)

    deadline = time.monotonic() + timeout
    while first_failed() is None and any(process.poll() is None for process in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    failed = first_failed()
    timed_out = failed is None and any(process.poll() is None for process in processes)
    for process in processes:
        if process.poll() is None:
            process.kill()
    for reader in readers:
        reader.join()
    if timed_out:
        raise SystemExit(f"the ranks ran past {timeout:.0f} s: all killed")
    if failed is not None:
        out, err = outputs[failed]
        status = processes[failed].returncode
        raise SystemExit(f"rank {failed} failed (exit status {status}):\n{err[-3000:]}\n{out[-1000:]}")
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
