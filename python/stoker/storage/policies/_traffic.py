"""What reading a store costs: requests by kind, bytes received, bytes its caches served, and an
estimate in dollars from a price table the user can set.

Object stores bill per request (a GET, a ranged GET, a LIST page) and, leaving their region, per
byte. `StoreTraffic` counts every request a backend sends, each retry included (a retried request
is billed again), and what the node cache and the in-memory block cache served instead of the
store. `PriceTable` turns the counts into money; `PRICE_TABLES` holds the public list prices of
the main object stores' standard tiers, with the date they were read.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

__all__ = ["PRICE_TABLES", "PriceTable", "StoreTraffic"]

# The request kinds a backend counts.
REQUEST_KINDS = ("GET", "ranged GET", "LIST", "HEAD", "read")


class StoreTraffic:
    """Counts of one store's traffic (thread-safe; cumulative for the store's life).

    Attributes:
        requests: Requests sent, by kind (``"GET"``, ``"ranged GET"``, ``"LIST"``, ``"HEAD"``,
            ``"read"`` for a database read).
        bytes_read: Bytes received from the store.
        cache_bytes: Bytes served by a cache instead of the store, by level (``"node cache"``,
            ``"block cache"``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.bytes_read = 0
        self.cache_bytes: Counter[str] = Counter()

    def request(self, kind: str) -> None:
        """One request of ``kind`` was sent."""
        with self._lock:
            self.requests[kind] += 1

    def received(self, size: int) -> None:
        """``size`` bytes came back from the store."""
        with self._lock:
            self.bytes_read += size

    def served(self, level: str, size: int) -> None:
        """A cache at ``level`` served ``size`` bytes the store did not have to."""
        with self._lock:
            self.cache_bytes[level] += size

    def snapshot(self) -> dict[str, Any]:
        """The counts now, as plain data."""
        with self._lock:
            return {"requests": dict(self.requests), "bytes_read": self.bytes_read, "cache_bytes": dict(self.cache_bytes)}


def epoch_traffic(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What happened between two reports (`RemoteStorage.traffic_report`: a snapshot with retries)."""
    return {
        "retries": after.get("retries", 0) - before.get("retries", 0),
        "requests": {
            kind: count - before["requests"].get(kind, 0)
            for kind, count in after["requests"].items()
            if count - before["requests"].get(kind, 0)
        },
        "bytes_read": after["bytes_read"] - before["bytes_read"],
        "cache_bytes": {
            level: size - before["cache_bytes"].get(level, 0)
            for level, size in after["cache_bytes"].items()
            if size - before["cache_bytes"].get(level, 0)
        },
    }


@dataclass(frozen=True)
class PriceTable:
    """What a store charges, in US dollars.

    Args:
        name: Whose prices (shown with the estimate).
        get_per_thousand: A thousand GETs, ranged or not (and HEADs).
        list_per_thousand: A thousand LIST requests (pages).
        egress_per_gigabyte: A gigabyte (10**9 bytes) read out of the store's region; 0 when the
            readers are in the region, where it is free on the main clouds.
        as_of: When these prices were read off the store's public price page.
    """

    name: str
    get_per_thousand: float
    list_per_thousand: float
    egress_per_gigabyte: float = 0.0
    as_of: str = ""

    def cost(self, traffic: dict[str, Any]) -> float:
        """Dollars for ``traffic`` (a `StoreTraffic.snapshot` or a difference of two)."""
        requests = traffic["requests"]
        gets = requests.get("GET", 0) + requests.get("ranged GET", 0) + requests.get("HEAD", 0)
        return (
            gets * self.get_per_thousand / 1000
            + requests.get("LIST", 0) * self.list_per_thousand / 1000
            + traffic["bytes_read"] / 1e9 * self.egress_per_gigabyte
        )


# Standard-tier list prices in the cheapest US region, as published on each store's pricing page
# (request prices; egress is left at 0, as for readers in the same region: set it for yours).
PRICE_TABLES: dict[str, PriceTable] = {
    "aws-s3-standard": PriceTable("AWS S3 Standard (us-east-1)", 0.0004, 0.005, 0.0, "2024-06"),
    "gcs-standard": PriceTable("Google Cloud Storage Standard", 0.0004, 0.005, 0.0, "2024-06"),
    "azure-blob-hot": PriceTable("Azure Blob Storage Hot (LRS)", 0.00044, 0.0055, 0.0, "2024-06"),
    "cloudflare-r2": PriceTable("Cloudflare R2 Standard", 0.00036, 0.0045, 0.0, "2024-06"),
    # A web server or CDN: no price per request; a CDN's egress is the user's to set.
    "http": PriceTable("HTTP(S) server (no request prices)", 0.0, 0.0, 0.0, ""),
}


def add_traffic(total: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Two epochs' traffic (`epoch_traffic`, priced or not) as one."""
    if not total:
        return {**more, "requests": dict(more["requests"]), "cache_bytes": dict(more["cache_bytes"])}
    merged = {
        "requests": dict(Counter(total["requests"]) + Counter(more["requests"])),
        "bytes_read": total["bytes_read"] + more["bytes_read"],
        "cache_bytes": dict(Counter(total["cache_bytes"]) + Counter(more["cache_bytes"])),
        "retries": total.get("retries", 0) + more.get("retries", 0),
    }
    if "cost" in total and "cost" in more:
        merged["cost"] = {**total["cost"], "dollars": total["cost"]["dollars"] + more["cost"]["dollars"]}
    return merged


def describe_traffic(traffic: dict[str, Any]) -> str:
    """One line: requests by kind, bytes, cache bytes, retries, and the estimate (``cost``)."""
    requests = ", ".join(f"{count:,} {kind}" for kind, count in sorted(traffic["requests"].items())) or "no requests"
    line = f"{requests}; {traffic['bytes_read'] / 1e6:,.1f} MB read"
    for level, size in sorted(traffic["cache_bytes"].items()):
        line += f", {size / 1e6:,.1f} MB from the {level}"
    if "retries" in traffic:
        line += f"; {traffic['retries']:,} retries"
    cost = traffic.get("cost")
    if cost:
        line += f"; about ${cost['dollars']:,.4f} at {cost['prices']} list prices ({cost['as_of']})"
    return line
