"""The peers' formats: their own libraries write the data (see `stoker_testbed.data.peer_formats`)."""

from stoker_testbed.fixtures import private_cache

__all__ = ["private_cache"]
