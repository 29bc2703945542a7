"""Filters over the metadata a dataset carries (`Sampling(where=...)`), worked out once over its
index: the expression and its evaluation, and the columns it reads (a storage's own, a side
table's, the fields of WebDataset ``json`` members)."""

from ._where import Where, describe, filter_storage, shuffle_quality

__all__ = ["Where", "describe", "filter_storage", "shuffle_quality"]
