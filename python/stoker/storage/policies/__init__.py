"""What wraps a backend's reads: retries to a deadline (`RetryPolicy`), a local cache of samples
shared by a node's ranks (`SampleCache`), and, used by the backends themselves, hedged block
fetches, block streaming and the in-memory block cache."""

from ._disk_cache import SampleCache
from ._retry import RetryPolicy

__all__ = ["RetryPolicy", "SampleCache"]
