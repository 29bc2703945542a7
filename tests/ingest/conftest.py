"""Small datasets on disk for the ingest tests (see `stoker_testbed.fixtures`)."""

from stoker_testbed.fixtures import folder, private_cache

__all__ = ["folder", "private_cache"]
