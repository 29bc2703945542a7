"""What wraps a backend's reads: retries to a deadline (`RetryPolicy`), a local cache of samples
shared by a node's ranks (`SampleCache`), what reading costs (`StoreTraffic`, `PriceTable`), and,
used by the backends themselves, hedged block fetches, block streaming and the in-memory block
cache."""

from ._disk_cache import SampleCache
from ._retry import RetryPolicy
from ._traffic import PRICE_TABLES, PriceTable, StoreTraffic

__all__ = ["PRICE_TABLES", "PriceTable", "RetryPolicy", "SampleCache", "StoreTraffic"]
