"""Test and benchmark scaffolding, never shipped: real servers (s3proxy, Cassandra from Maven
Central jars) started on loopback, a latency proxy, and the remote peers of the benchmarks.

`tests/` imports it as ``tests.support``; a benchmark that needs it puts the repository root on
``sys.path`` first.
"""

from tests.support.cassandra_server import CassandraServer
from tests.support.latency_proxy import LatencyProxy
from tests.support.proxy_process import ProxyProcess
from tests.support.s3_server import S3Server
from tests.support.server import ServerError

__all__ = ["CassandraServer", "LatencyProxy", "ProxyProcess", "S3Server", "ServerError"]
