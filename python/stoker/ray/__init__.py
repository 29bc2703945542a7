"""Ray Data integration: `StokerDatasource` reads any stoker storage into a Ray dataset (read tasks
by index ranges; columns index, key, label, bytes or decoded images) for preprocessing at scale
with ``map_batches``; `StokerShardSink` writes indexed tar shards from many workers with one
``dataset.json`` committed at the end; `convert_with_ray` (``stoker convert --ray``) joins the two;
`RayLoader` feeds a Ray pipeline's output to training as stoker batches (batch memory, device
transfer, data-wait meter).
Ray is an optional extra (``pip install 'stoker[ray]'``): nothing here imports it until used."""

from ._cluster import KEEPALIVE_SETTINGS, check_keepalive
from ._convert import convert_with_ray
from ._datasink import StokerShardSink
from ._datasource import StokerDatasource
from ._loader import RayLoader
from ._loader_stats import RayLoaderStats

__all__ = [
    "KEEPALIVE_SETTINGS",
    "RayLoader",
    "RayLoaderStats",
    "StokerDatasource",
    "StokerShardSink",
    "check_keepalive",
    "convert_with_ray",
]
