"""Ray's settings that decide how long a lost host stalls a read, checked once per process.

With Ray's defaults, a task that was running on a host the cluster loses is retried only when the
caller's gRPC keepalive gives up on the connection: ``RAY_grpc_client_keepalive_time_ms``
(300,000) plus ``RAY_grpc_client_keepalive_timeout_ms`` (120,000), or earlier when TCP itself
does. In stoker's hosts test (a head and two worker nodes, one lost mid-read) that was 117-139 s
with the read stuck at 234 of 240 rows; with both at 2,000 ms the read went on about 4 s after the
loss. A single machine has nothing to lose, so only a cluster of more than one node is told.
"""

from __future__ import annotations

import threading
from typing import Any

from .._bounded import shown_logger

__all__ = ["KEEPALIVE_SETTINGS", "check_keepalive"]

_logger = shown_logger("stoker.ray")

KEEPALIVE_SETTINGS = ("RAY_grpc_client_keepalive_time_ms", "RAY_grpc_client_keepalive_timeout_ms")
# Keepalive time plus timeout beyond which a lost host is worth a warning.
_LONG_MS = 30_000
_told = threading.Event()


def check_keepalive() -> str | None:
    """Warn once per process, on ``stoker.ray``, when this process is connected to a Ray cluster
    of more than one node and its gRPC keepalive would let a lost host stall a read for minutes.

    Returns:
        The warning (also when it was given before), or None where there is nothing to say:
        Ray not started here, one node, or keepalive settings that notice a loss within 30 s.
    """
    try:
        import ray
        from ray._raylet import Config  # type: ignore[attr-defined]  # Ray's settings as this process read them
    except ImportError:
        return None
    if not ray.is_initialized():
        return None
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    if len(nodes) < 2:
        return None
    values: dict[str, Any] = {
        KEEPALIVE_SETTINGS[0]: Config.grpc_client_keepalive_time_ms(),
        KEEPALIVE_SETTINGS[1]: Config.grpc_client_keepalive_timeout_ms(),
    }
    if sum(values.values()) <= _LONG_MS:
        return None
    message = (
        f"stoker: this Ray cluster has {len(nodes)} nodes and runs with Ray's default gRPC keepalive "
        f"({', '.join(f'{name}={value}' for name, value in values.items())}): a host lost mid-read stalls the read "
        "until the connection is given up, about 2 minutes (117-139 s measured in stoker's hosts test, where 2,000 ms "
        f"each made it about 4 s). Set {KEEPALIVE_SETTINGS[0]}=2000 and {KEEPALIVE_SETTINGS[1]}=2000 in the environment "
        "of `ray start` on every node and of the driver (see stoker's Ray docs)"
    )
    if not _told.is_set():
        _told.set()
        _logger.warning("%s", message)
    return message
