"""Small datasets on disk for the storage tests (see `stoker_testbed.fixtures`)."""

from stoker_testbed.fixtures import folder, private_cache

__all__ = ["folder", "private_cache"]
