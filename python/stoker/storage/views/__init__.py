"""Storages made of other storages: some samples of one (`SubsetStorage`, a split; `FilteredStorage`,
what a filter kept), or several mixed by weight, drawn anew each epoch (`MixedStorage`)."""

from ._filtered import FilteredStorage
from ._mixture import MixedStorage
from ._subset import SubsetStorage

__all__ = ["FilteredStorage", "MixedStorage", "SubsetStorage"]
