"""A WebDataset brace list at the documented bound (10^7 files): its cost in memory and time, side by
side with braceexpand (what WebDataset expands such a list with), each stage in a process of its own
so that its peak RSS is its own.

Stages:
- ``peer``: braceexpand's list of the URLs.
- ``parse``: stoker's `parse_url_list` (every URL checked, the names computed when asked for).
- ``open``: `HTTPStorage` over the list with each HEAD answered in this process (the network left
  out: what stoker itself holds and spends per file), and a name at the start and end of the list.
- ``loader``: a Loader over that storage (its fingerprint hashes every key), and the first batches
  with each GET answered in this process, decode free.
- ``served`` (``--served N``): the open against a real HTTP server on loopback holding N files, for
  the rate of HEADs a web server answers, which bounds an open of a long list of files.

Run:  python benchmarks/storage/url_list_scale.py [--urls 1e7] [--served 5000] [--skip-peer]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

PREFIX = "https://host.example/data/"


def _pattern(count: int) -> str:
    width = len(str(count - 1))
    return f"{PREFIX}img-{{{0:0{width}d}..{count - 1}}}.jpg"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _in_process_storage(count: int) -> Any:
    """HTTPStorage over the list, its HEADs and GETs answered here (no request leaves)."""
    from stoker.storage import HTTPStorage

    class Answered(HTTPStorage):
        async def _head(self, name: str) -> dict[str, Any]:
            return {"size": 4}

        async def _request(self, index: int, extension: str | None = None) -> bytes:
            return b"\xff\xd8\xff\xd9"

    return Answered(_pattern(count))


def stage(name: str, count: int) -> dict[str, Any]:
    """One stage, in this process: its seconds and this process's peak RSS."""
    if name == "peer":
        from braceexpand import braceexpand
    else:
        from stoker import Loader
        from stoker.loader import Sampling
        from stoker.storage.remote.url_lists import parse_url_list
    baseline = _rss_mb()
    started = time.perf_counter()
    found: dict[str, Any] = {}
    if name == "peer":
        found["urls"] = len(list(braceexpand(_pattern(count))))
    elif name == "parse":
        listed = parse_url_list(_pattern(count))
        found["urls"] = len(listed.names or [])
    elif name in ("open", "loader"):
        storage = _in_process_storage(count)
        found["open_seconds"] = time.perf_counter() - started
        names = storage.keys
        timer = time.perf_counter()
        for index in (*range(1000), *range(count - 1000, count)):
            names[index]
        found["name_us"] = (time.perf_counter() - timer) / 2000 * 1e6
        found["urls"] = len(names)
        if name == "loader":
            timer = time.perf_counter()
            loader = Loader(storage, batch_size=256, decode=bytes, sampling=Sampling(shuffle="uniform", seed=1))
            batches = iter(loader)
            next(batches)
            found["first_batch_seconds"] = time.perf_counter() - timer  # the Loader made, the keys hashed
            timer = time.perf_counter()
            delivered = sum(len(batch.keys) for _, batch in zip(range(200), batches))
            found["samples_per_second"] = delivered / (time.perf_counter() - timer)
            timer = time.perf_counter()
            found["state_bytes"] = len(json.dumps(loader.state_dict()))  # the first one hashes every key
            found["state_dict_seconds"] = time.perf_counter() - timer
            loader.close()
        storage.close()
    elif name == "served":
        found.update(_served(count))
    found["seconds"] = time.perf_counter() - started
    found["peak_rss_mb"] = _rss_mb()
    found["baseline_rss_mb"] = baseline
    return found


def _served(count: int) -> dict[str, Any]:
    from stoker.storage import open_storage
    from stoker_testbed.availability import started
    from stoker_testbed.servers.http_server import HttpFileServer

    server = started(HttpFileServer(), "the HTTP test server (aiohttp)")
    try:
        width = len(str(count - 1))
        (server.root / "data").mkdir()
        for index in range(count):
            (server.root / "data" / f"img-{index:0{width}d}.jpg").write_bytes(b"\xff\xd8\xff\xd9")
        url = server.url(f"data/img-{{{0:0{width}d}..{count - 1}}}.jpg")
        used = resource.getrusage(resource.RUSAGE_SELF)
        timer = time.perf_counter()
        with open_storage(url) as storage:
            seconds = time.perf_counter() - timer
            after = resource.getrusage(resource.RUSAGE_SELF)
            heads = storage.traffic.snapshot()["requests"].get("HEAD", 0)
        cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
        return {"open_seconds": seconds, "heads": heads, "heads_per_second": heads / seconds, "client_cpu_ms_per_head": 1000 * cpu / heads}
    finally:
        server.close()


def _run(name: str, count: int) -> dict[str, Any]:
    result = subprocess.run([sys.executable, __file__, "--stage", name, "--urls", str(count)], capture_output=True, text=True)
    if result.returncode != 0:
        return {"failed": (result.stderr.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", type=float, default=1e7)
    parser.add_argument("--served", type=int, default=0, help="also open a list of this many files on a loopback server")
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--stage", help=argparse.SUPPRESS)
    args = parser.parse_args()
    count = int(args.urls)
    if args.stage:
        print(json.dumps(stage(args.stage, count)))
        return
    print(f"a brace list of {count:,} URLs ({_pattern(count)})")
    rows = [] if args.skip_peer else ["peer"]
    rows += ["parse", "open", "loader"] + (["served"] if args.served else [])
    for name in rows:
        found = _run(name, count if name != "served" else args.served)
        print(f"  {name:7s} {json.dumps(found)}", flush=True)


if __name__ == "__main__":
    main()
