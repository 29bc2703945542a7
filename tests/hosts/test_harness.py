"""The multi-host harness itself: hosts reach each other and the test, each has its own disk at
the same path, a partition drops silently and heals, loss drops about its share, and nothing is
left behind, also when the test fails inside."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from stoker_testbed.hosts import HOST_DISK, HostNetwork

SERVE = "import http.server, sys; http.server.test(http.server.SimpleHTTPRequestHandler, port=8000, bind=sys.argv[1])"


def fetch(network: HostNetwork, host: str, url: str, timeout: float = 3.0) -> str:
    """What ``host`` gets from ``url`` (or the error's name)."""
    code = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout={timeout}).read().decode())"
    result = subprocess.run([*network[host].prefix(), sys.executable, "-c", code], capture_output=True, text=True, cwd=HOST_DISK.parent)
    return result.stdout.strip() if result.returncode == 0 else result.stderr.strip().splitlines()[-1]


def left_behind(network: HostNetwork) -> list[str]:
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [line for line in (namespaces + links).splitlines() if f"stk{network.tag}" in line or network.bridge in line]


def test_hosts_have_their_own_disks_reach_each_other_and_are_removed(hosts: type[HostNetwork]) -> None:
    with hosts(["h0", "h1"]) as network:
        for name in ("h0", "h1"):
            (network[name].disk / "who").write_text(name)
        network.run("h1", [sys.executable, "-c", SERVE, network["h1"].address], cwd=network["h1"].disk)
        deadline = time.monotonic() + 20
        while "h1" not in (answer := fetch(network, "h0", f"http://{network['h1'].address}:8000/who")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert answer == "h1"  # h0 reads h1's disk through h1's server: two stacks, two disks
        own = subprocess.run([*network["h0"].prefix(), "cat", str(HOST_DISK / "who")], capture_output=True, text=True).stdout
        assert own == "h0"
        network.partition("h0", "h1")
        started = time.monotonic()
        assert "timed out" in fetch(network, "h0", f"http://{network['h1'].address}:8000/who", timeout=1.5)
        assert time.monotonic() - started >= 1.4, "a partition drops silently: the client waits, it is not refused"
        network.heal("h0", "h1")
        assert fetch(network, "h0", f"http://{network['h1'].address}:8000/who") == "h1"
        port = network.delayed_route("h0", "h1", 8000, delay=0.1)
        started = time.monotonic()
        assert fetch(network, "h0", f"http://127.0.0.1:{port}/who") == "h1"
        assert time.monotonic() - started >= 0.2, "the route adds 100 ms each way"
    assert not left_behind(network)


def test_loss_drops_about_its_share_of_packets(hosts: type[HostNetwork]) -> None:
    # The receiver counts until the test says the sender is done, not until a quiet spell: on a
    # loaded machine the sender's own start can take longer than any fixed quiet spell (CI once
    # counted 0 of 2,000 that way, the receiver having given up before the first was sent).
    receive = (
        "import socket, sys, threading; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 9000))\n"
        "n = 0\n"
        "def count():\n    global n\n    while True: s.recv(64); n += 1\n"
        "threading.Thread(target=count, daemon=True).start()\n"
        "print('bound', flush=True)\n"
        "sys.stdin.readline()\n"
        "print(n, flush=True)"
    )
    send = "import socket, sys, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nfor _ in range(2000): s.sendto(b'x', (sys.argv[1], 9000)); time.sleep(0.0005)"
    with hosts(["h0", "h1"]) as network:
        network.shape("h0", loss_percent=20)
        receiver = subprocess.Popen(
            [*network["h1"].prefix(), sys.executable, "-c", receive, network["h1"].address],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        # Sent only once the receiver is bound: on a loaded machine its start can take seconds, and
        # datagrams sent before are lost for a reason that is not the switch's.
        assert receiver.stdout is not None and receiver.stdout.readline().strip() == "bound"
        subprocess.run([*network["h0"].prefix(), sys.executable, "-c", send, network["h1"].address], check=True)
        time.sleep(1.0)  # the last datagrams cross the bridge
        received = int(receiver.communicate("done\n", timeout=30)[0])
    assert 1400 <= received <= 1800, f"20% loss: {received} of 2,000 datagrams arrived"


def test_everything_is_removed_when_the_test_fails_inside(hosts: type[HostNetwork]) -> None:
    with pytest.raises(RuntimeError, match="inside"), hosts(["h0"]) as network:
        network.run("h0", ["sleep", "600"])
        raise RuntimeError("a failure inside the test")
    assert not left_behind(network)
    assert not network.hosts


def test_hosts_left_by_a_killed_test_run_are_removed_by_the_next(hosts: type[HostNetwork]) -> None:
    leave = "import time; from stoker_testbed.hosts import HostNetwork; network = HostNetwork(['a']).__enter__(); print(network.tag, flush=True); time.sleep(600)"
    child = subprocess.Popen([sys.executable, "-c", leave], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    assert child.stdout is not None
    tag = child.stdout.readline().strip()
    child.kill()  # no tear-down: its host stays behind
    child.wait()
    assert f"stk{tag}-a" in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    with hosts(["b"]):
        pass
    assert f"stk{tag}-a" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
