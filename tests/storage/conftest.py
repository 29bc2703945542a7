"""Small datasets on disk for the storage tests (see `tests.support.fixtures`)."""

from tests.support.fixtures import folder, private_cache

__all__ = ["folder", "private_cache"]
