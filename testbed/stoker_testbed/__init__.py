"""Test and benchmark scaffolding, never shipped: real servers (s3proxy, Cassandra from Maven
Central jars, Ray) started on loopback, a latency proxy, the hosts harness (network namespaces),
data makers and the peers' loaders of the benchmarks.

It is a package of its own (``testbed/pyproject.toml``, installed editable by ``make test`` and
``make bench``), so ``tests/`` and ``benchmarks/`` both import it as ``stoker_testbed`` and
neither edits ``sys.path``.
"""

from stoker_testbed.servers.cassandra_server import CassandraServer
from stoker_testbed.servers.latency_proxy import LatencyProxy
from stoker_testbed.servers.proxy_process import ProxyProcess
from stoker_testbed.servers.s3_server import S3Server
from stoker_testbed.servers.server import ServerError

__all__ = ["CassandraServer", "LatencyProxy", "ProxyProcess", "S3Server", "ServerError"]
