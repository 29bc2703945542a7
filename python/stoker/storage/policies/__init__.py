"""What wraps a backend's reads: retries to a deadline (`RetryPolicy`), a local cache of samples
shared by a node's ranks (`SampleCache`), what reading costs (`StoreTraffic`, `PriceTable`), and,
used by the backends themselves, hedged block fetches, block streaming, the in-memory block
cache, and local copies of the files of a server that serves no byte ranges (`WholeFiles`)."""

from ._block_cache import BlockCache
from ._block_reads import BlockReader
from ._disk_cache import SampleCache
from ._hedged import HedgedCalls, hedged_copy, is_hedged_copy
from ._retry import ErrorKind, RetryCounters, RetryPolicy, call_with_retries, failure_line, first_line
from ._traffic import PRICE_TABLES, PriceTable, StoreTraffic, add_traffic, describe_traffic, epoch_traffic
from ._whole_files import WholeFiles

__all__ = [
    "BlockCache",
    "BlockReader",
    "ErrorKind",
    "HedgedCalls",
    "PRICE_TABLES",
    "PriceTable",
    "RetryCounters",
    "RetryPolicy",
    "SampleCache",
    "StoreTraffic",
    "WholeFiles",
    "add_traffic",
    "call_with_retries",
    "describe_traffic",
    "epoch_traffic",
    "failure_line",
    "first_line",
    "hedged_copy",
    "is_hedged_copy",
]
