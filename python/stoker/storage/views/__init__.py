"""Storages made of other storages: some samples of one (`SubsetStorage`, a split), or several
mixed by weight, drawn anew each epoch (`MixedStorage`)."""

from ._mixture import MixedStorage
from ._subset import SubsetStorage

__all__ = ["MixedStorage", "SubsetStorage"]
