"""On a Ray cluster of more than one node with Ray's default gRPC keepalive, `RayLoader` warns
once, naming the two settings and the measured cost of a lost host; with the settings made short,
or on one node, it says nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("ray")

SCRIPT = """
import json, logging, ray
from ray.cluster_utils import Cluster
from stoker.ray import RayLoader, check_keepalive

records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("stoker.ray").addHandler(handler)
nodes = int(__import__("sys").argv[1])
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 80_000_000})
for _ in range(nodes - 1):
    cluster.add_node(num_cpus=1, object_store_memory=80_000_000)
cluster.wait_for_nodes()
ray.init(address=cluster.address, include_dashboard=False)
dataset = ray.data.from_items([{"data": [index, index], "label": index} for index in range(8)])
for epoch in range(2):
    rows = sum(len(batch.labels) for batch in RayLoader(dataset, batch_size=4, data_column="data"))
print(json.dumps({"rows": rows, "warnings": [text for text in records if "keepalive" in text], "returned": check_keepalive()}))
ray.shutdown()
cluster.shutdown()
"""


def run(nodes: int, **environment: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(nodes)], capture_output=True, text=True, timeout=240, env={**os.environ, **environment}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_cluster_with_the_default_keepalive_is_told_once_what_to_set() -> None:
    result = run(2)
    assert result["rows"] == 8
    (warning,) = result["warnings"]  # two epochs, one warning
    assert "this Ray cluster has 2 nodes" in warning
    assert "RAY_grpc_client_keepalive_time_ms=300000" in warning and "RAY_grpc_client_keepalive_timeout_ms=120000" in warning
    assert "117-139 s measured" in warning
    assert "Set RAY_grpc_client_keepalive_time_ms=2000 and RAY_grpc_client_keepalive_timeout_ms=2000" in warning
    assert result["returned"] == warning


def test_short_keepalive_settings_or_one_node_are_not_warned_about() -> None:
    short = run(2, RAY_grpc_client_keepalive_time_ms="2000", RAY_grpc_client_keepalive_timeout_ms="2000")
    assert short["rows"] == 8 and short["warnings"] == [] and short["returned"] is None
    alone = run(1)
    assert alone["rows"] == 8 and alone["warnings"] == [] and alone["returned"] is None
