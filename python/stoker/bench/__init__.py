"""`stoker bench`: measured runs, side-by-side peers, scenarios from the papers."""

from ._images import encode_jpeg, image_folder, make_jpegs, natural_image
from ._cassandra_server import CassandraServer
from ._latency_proxy import LatencyProxy
from ._proxy_process import ProxyProcess
from ._s3_server import S3Server
from ._server import ServerError
from ._run import LatencyStorage, RunResult, run_loader

__all__ = [
    "CassandraServer",
    "LatencyProxy",
    "ProxyProcess",
    "S3Server",
    "ServerError",
    "LatencyStorage", "RunResult", "encode_jpeg", "image_folder", "make_jpegs", "natural_image", "run_loader"]
